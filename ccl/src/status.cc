#include "ftccl/status.h"

#include <cstring>

namespace ftccl {

const char* CodeName(Code code) {
  switch (code) {
    case Code::kOk: return "OK";
    case Code::kInvalidArgument: return "INVALID_ARGUMENT";
    case Code::kTimeout: return "TIMEOUT";
    case Code::kNetwork: return "NETWORK";
    case Code::kPeerLost: return "PEER_LOST";
    case Code::kMismatch: return "MISMATCH";
    case Code::kCorrupt: return "CORRUPT";
    case Code::kAborted: return "ABORTED";
    case Code::kInternal: return "INTERNAL";
  }
  return "UNKNOWN";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(CodeName(code_)) + ": " + message_;
}

Status Status::WithContext(const std::string& context) const {
  if (ok()) return *this;
  return Status(code_, context + ": " + message_);
}

Status ErrnoStatus(const std::string& what, int err) {
  Code code = Code::kNetwork;
  switch (err) {
    case EINVAL:
    case EAFNOSUPPORT:
    case EADDRNOTAVAIL:
    case ENODEV:
    case ENOTSOCK:
    case EBADF:
      code = Code::kInvalidArgument;
      break;
    case ETIMEDOUT:
      code = Code::kTimeout;
      break;
    case ENOMEM:
    case EMFILE:
    case ENFILE:
      code = Code::kInternal;
      break;
    default:
      break;
  }
  return Status(code, what + ": " + std::strerror(err) + " (errno " + std::to_string(err) + ")");
}

}  // namespace ftccl
