// Errors as values. A Result<T> holds either a T or an Error; no exceptions cross
// module boundaries. An Error names where it happened and, when a syscall failed,
// its errno, so a message reads like: mount /proc: Operation not permitted.
#pragma once

#include <cerrno>
#include <string>
#include <utility>
#include <variant>

namespace rf {

// What kind of failure, for callers that act on it (explain it, retry, fall
// back) without searching the text.
enum class ErrorCode {
  kUnknown,
  kNotFound,      // a named thing does not exist (an image, a container, a file)
  kIncompatible,  // a peer speaks a version outside our range (the tool runner's protocol)
  kUnavailable,   // a service did not answer (a Docker daemon that is down)
  kDenied,        // the request's principal or the operator's policy does not allow it
  kLeaseLost,     // a worker no longer holds the call or run it writes (the sweep ended it)
  kFenced,        // another process registered the worker's id since this one did
  kConflict,      // the name or state asked for is another's (a live sandbox's name)
  kLimit,         // a count the operator's policy bounds is reached (running processes)
};

struct Error {
  std::string where;    // the step, field or path the error is about
  std::string message;  // human text; empty when errno alone says it
  int sys_errno = 0;    // 0 when not a syscall failure
  ErrorCode code = ErrorCode::kUnknown;

  // "where: message: strerror" with the empty parts left out.
  std::string to_string() const;
};

// An error from a failed syscall: errno is read at the call.
Error sys_error(std::string where, int err = errno);
Error make_error(std::string where, std::string message);
Error make_error(ErrorCode code, std::string where, std::string message);

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}      // NOLINT(google-explicit-constructor)
  Result(Error error) : v_(std::move(error)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const Error& error() const { return std::get<1>(v_); }
  Error&& take_error() { return std::get<1>(std::move(v_)); }

 private:
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : err_(std::move(error)), ok_(false) {}  // NOLINT
  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const { return err_; }
  Error&& take_error() { return std::move(err_); }

 private:
  Error err_;
  bool ok_ = true;
};

using Status = Result<void>;

inline Status ok_status() { return Status(); }

}  // namespace rf

// Returns the error of `expr` (a Result) from the enclosing function.
#define RF_TRY(expr)                                              \
  do {                                                            \
    auto rf_try_result_ = (expr);                                 \
    if (!rf_try_result_.ok()) return rf_try_result_.take_error(); \
  } while (0)
