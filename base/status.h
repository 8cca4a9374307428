// Status and StatusOr: errors as values at module boundaries.
//
// A Status is either OK or carries a code and a one-line message that says
// what went wrong, where (file, field) and how to fix it. StatusOr<T> holds
// either a T or a non-OK Status. Both are cheap to move and own their data.
// Accessing the value of a non-OK StatusOr aborts (an invariant break).
// Thread-compatible: distinct objects may be used from distinct threads.
#pragma once

#include <optional>
#include <string>
#include <utility>

#include "base/check.h"

namespace dt {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // bad user input: a field, a flag, a file's content
  kNotFound,         // a named file or profile does not exist
  kInfeasible,       // valid input but no plan satisfies it
  kIoError,          // reading or writing a file failed
  kInternal,         // a bug: should not happen
};

class Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "message" for printing; "ok" when OK.
  std::string ToString() const { return ok() ? "ok" : message_; }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return Status(StatusCode::kInvalidArgument, std::move(m)); }
inline Status NotFound(std::string m) { return Status(StatusCode::kNotFound, std::move(m)); }
inline Status Infeasible(std::string m) { return Status(StatusCode::kInfeasible, std::move(m)); }
inline Status IoError(std::string m) { return Status(StatusCode::kIoError, std::move(m)); }
inline Status Internal(std::string m) { return Status(StatusCode::kInternal, std::move(m)); }

template <typename T>
class StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  StatusOr(Status status) : status_(std::move(status)) {  // NOLINT
    DT_CHECK(!status_.ok()) << "StatusOr built from an OK status without a value";
  }
  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  const T& value() const& {
    DT_CHECK(ok()) << "value() of failed StatusOr: " << status_.message();
    return *value_;
  }
  T& value() & {
    DT_CHECK(ok()) << "value() of failed StatusOr: " << status_.message();
    return *value_;
  }
  T&& value() && {
    DT_CHECK(ok()) << "value() of failed StatusOr: " << status_.message();
    return std::move(*value_);
  }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace dt

// Propagate a non-OK Status from an expression returning Status.
#define DT_RETURN_IF_ERROR(expr)          \
  do {                                    \
    ::dt::Status _dt_st = (expr);         \
    if (!_dt_st.ok()) return _dt_st;      \
  } while (0)

#define DT_CONCAT_INNER(a, b) a##b
#define DT_CONCAT(a, b) DT_CONCAT_INNER(a, b)
// Assign the value of a StatusOr expression to lhs, or return its Status.
#define DT_ASSIGN_OR_RETURN(lhs, expr)                         \
  auto DT_CONCAT(_dt_so_, __LINE__) = (expr);                  \
  if (!DT_CONCAT(_dt_so_, __LINE__).ok())                      \
    return DT_CONCAT(_dt_so_, __LINE__).status();              \
  lhs = std::move(DT_CONCAT(_dt_so_, __LINE__)).value()
