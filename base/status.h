// Status and Result: how every injector (and runner) call reports success or failure.
//
// Expected failures (kernel refusals, missing kernel features, bad input, policy refusals) are
// values, never exceptions. A Status is cheap to copy when ok. Thread-safe as a value type.
// errno is turned into a Status in one place: ErrnoStatus().
#pragma once

#include <optional>
#include <string>
#include <utility>

namespace faultline {

// The closed set of error codes.
enum class Code : int {
  kOk = 0,
  kInvalidArgument,   // bad parameters or input; nothing was changed
  kNotFound,          // the named interface, namespace, process or entry does not exist
  kPermissionDenied,  // refused by the allowlist policy (or by the kernel: EPERM/EACCES)
  kAlreadyExists,     // something is in the way (e.g. a qdisc the user created)
  kUnavailable,       // a kernel feature or peer is missing (no sch_netem, no hook listener)
  kKernel,            // the kernel refused an operation for another reason
  kInternal,          // a bug or an unexpected system failure
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
  // Prefixes the message with "<context>: "; no-op when ok.
  Status WithContext(const std::string& context) const;
  // Explicitly drops a status (used in noexcept teardown paths that keep going).
  void IgnoreError() const {}

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return {Code::kInvalidArgument, std::move(m)}; }
inline Status NotFound(std::string m) { return {Code::kNotFound, std::move(m)}; }
inline Status PermissionDenied(std::string m) { return {Code::kPermissionDenied, std::move(m)}; }
inline Status AlreadyExists(std::string m) { return {Code::kAlreadyExists, std::move(m)}; }
inline Status Unavailable(std::string m) { return {Code::kUnavailable, std::move(m)}; }
inline Status KernelError(std::string m) { return {Code::kKernel, std::move(m)}; }
inline Status Internal(std::string m) { return {Code::kInternal, std::move(m)}; }

// Turns errno into a Status ("<what>: <strerror> (errno N)") with a code chosen from errno
// (ENOENT/ENODEV/ESRCH -> kNotFound, EPERM/EACCES -> kPermissionDenied, EEXIST ->
// kAlreadyExists, EOPNOTSUPP/ECONNREFUSED -> kUnavailable, else kKernel). errno is positive.
Status ErrnoStatus(const std::string& what, int err);

// A value or an error Status.
template <typename T>
class [[nodiscard]] Result final {
 public:
  Result(T value) : value_(std::move(value)) {}          // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {}  // NOLINT: implicit by design

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  T&& value() && { return std::move(*value_); }
  const T& value() const& { return *value_; }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() { return *value_; }
  const T& operator*() const { return *value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace faultline

// Aborts with file:line when an invariant is broken (a bug, not an expected failure).
#define FL_CHECK(cond)                                                          \
  do {                                                                          \
    if (!(cond)) ::faultline::internal::CheckFailed(__FILE__, __LINE__, #cond); \
  } while (0)

#define FL_RETURN_IF_ERROR(expr)      \
  do {                                \
    ::faultline::Status _st = (expr); \
    if (!_st.ok()) return _st;        \
  } while (0)

#define FL_CONCAT_INNER(a, b) a##b
#define FL_CONCAT(a, b) FL_CONCAT_INNER(a, b)
// FL_ASSIGN_OR_RETURN(auto x, ResultExpr()): declares x from the value or returns the error.
#define FL_ASSIGN_OR_RETURN(lhs, expr) \
  FL_ASSIGN_OR_RETURN_IMPL(FL_CONCAT(_res_, __LINE__), lhs, expr)
#define FL_ASSIGN_OR_RETURN_IMPL(res, lhs, expr) \
  auto res = (expr);                             \
  if (!res.ok()) return res.status();            \
  lhs = std::move(res).value()

namespace faultline::internal {
[[noreturn]] void CheckFailed(const char* file, int line, const char* cond);
}  // namespace faultline::internal
