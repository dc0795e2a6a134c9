// Status and Result: how every ftccl call reports success or failure.
//
// Expected failures (network, peer, deadline, bad input) are values, never exceptions or
// aborts. A Status is cheap to copy when ok. Thread-safe as a value type.
#pragma once

#include <optional>
#include <string>
#include <utility>

namespace ftccl {

// The closed set of error codes. Documented meanings:
enum class Code : int {
  kOk = 0,
  kInvalidArgument,  // bad options or arguments; nothing was started
  kTimeout,          // the deadline passed before the operation completed
  kNetwork,          // a socket or address error (unreachable, refused, reset)
  kPeerLost,         // no usable connection to a peer remains, or it died
  kMismatch,         // ranks called different collectives (op, dtype, count or root)
  kCorrupt,          // a frame failed its integrity check and could not be recovered
  kAborted,          // the operation was aborted (locally or by a peer's error)
  kInternal,         // a bug or an unexpected system failure
};

const char* CodeName(Code code);

class [[nodiscard]] Status final {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  // "OK" or "<CODE>: <message>".
  std::string ToString() const;

  // Prefixes the message with context; no-op when ok.
  Status WithContext(const std::string& context) const;

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return Status(Code::kInvalidArgument, std::move(m)); }
inline Status Timeout(std::string m) { return Status(Code::kTimeout, std::move(m)); }
inline Status NetworkError(std::string m) { return Status(Code::kNetwork, std::move(m)); }
inline Status PeerLost(std::string m) { return Status(Code::kPeerLost, std::move(m)); }
inline Status Mismatch(std::string m) { return Status(Code::kMismatch, std::move(m)); }
inline Status Corrupt(std::string m) { return Status(Code::kCorrupt, std::move(m)); }
inline Status Aborted(std::string m) { return Status(Code::kAborted, std::move(m)); }
inline Status Internal(std::string m) { return Status(Code::kInternal, std::move(m)); }

// Turns errno into a Status ("<what>: <strerror> (errno N)"). The one place this is done.
Status ErrnoStatus(const std::string& what, int err);

// A value or an error Status.
template <typename T>
class [[nodiscard]] Result final {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {}  // NOLINT: implicit by design

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  T&& value() && { return std::move(*value_); }
  const T& value() const& { return *value_; }
  T* operator->() { return &*value_; }
  T& operator*() { return *value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace ftccl

#define FTCCL_RETURN_IF_ERROR(expr)        \
  do {                                     \
    ::ftccl::Status _st = (expr);          \
    if (!_st.ok()) return _st;             \
  } while (0)
