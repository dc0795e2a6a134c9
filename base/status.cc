#include "base/status.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace faultline {

const char* CodeName(Code code) {
  switch (code) {
    case Code::kOk:
      return "OK";
    case Code::kInvalidArgument:
      return "INVALID_ARGUMENT";
    case Code::kNotFound:
      return "NOT_FOUND";
    case Code::kPermissionDenied:
      return "PERMISSION_DENIED";
    case Code::kAlreadyExists:
      return "ALREADY_EXISTS";
    case Code::kUnavailable:
      return "UNAVAILABLE";
    case Code::kKernel:
      return "KERNEL";
    case Code::kInternal:
      return "INTERNAL";
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
  if (err < 0) err = -err;
  Code code = Code::kKernel;
  switch (err) {
    case ENOENT:
    case ENODEV:
    case ESRCH:
      code = Code::kNotFound;
      break;
    case EPERM:
    case EACCES:
      code = Code::kPermissionDenied;
      break;
    case EEXIST:
      code = Code::kAlreadyExists;
      break;
    case EOPNOTSUPP:
    case ECONNREFUSED:
      code = Code::kUnavailable;
      break;
    default:
      break;
  }
  return Status(code, what + ": " + std::strerror(err) + " (errno " + std::to_string(err) + ")");
}

namespace internal {
void CheckFailed(const char* file, int line, const char* cond) {
  std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", file, line, cond);
  std::abort();
}
}  // namespace internal

}  // namespace faultline
