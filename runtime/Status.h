//===- Status.h - the runtime's error model ---------------------*- C++ -*-===//
//
// No exceptions: fallible functions return Status or StatusOr<T>. A message
// says what went wrong, where (file, tensor, op) and, when we know, the fix.
//
//===----------------------------------------------------------------------===//

#ifndef MFC_RUNTIME_STATUS_H
#define MFC_RUNTIME_STATUS_H

#include <cassert>
#include <optional>
#include <string>
#include <utility>

namespace mfrt {

class [[nodiscard]] Status {
public:
  static Status ok() { return Status(); }
  static Status error(std::string message) {
    Status status;
    status.message_ = std::move(message);
    status.failed_ = true;
    return status;
  }

  bool isOk() const { return !failed_; }
  explicit operator bool() const { return isOk(); }
  const std::string &message() const { return message_; }

  /// Prefixes the message with context: "loading weights: " + message.
  Status withContext(const std::string &context) const {
    return failed_ ? error(context + ": " + message_) : *this;
  }

private:
  std::string message_;
  bool failed_ = false;
};

template <typename T> class [[nodiscard]] StatusOr {
public:
  StatusOr(T value) : value_(std::move(value)) {}
  StatusOr(Status status) : status_(std::move(status)) {
    assert(!status_.isOk() && "StatusOr needs a value or an error");
  }

  bool isOk() const { return value_.has_value(); }
  explicit operator bool() const { return isOk(); }
  const Status &status() const { return status_; }
  T &operator*() { return *value_; }
  const T &operator*() const { return *value_; }
  T *operator->() { return &*value_; }
  const T *operator->() const { return &*value_; }
  T take() { return std::move(*value_); }

private:
  Status status_;
  std::optional<T> value_;
};

} // namespace mfrt

/// Returns the error of a Status-returning expression from the caller.
#define MFRT_RETURN_IF_ERROR(expr)                                             \
  do {                                                                         \
    ::mfrt::Status mfrtStatus_ = (expr);                                       \
    if (!mfrtStatus_.isOk()) {                                                 \
      return mfrtStatus_;                                                      \
    }                                                                          \
  } while (false)

#endif // MFC_RUNTIME_STATUS_H
