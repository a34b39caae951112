//===- Status.h - the runtime's error model ---------------------*- C++ -*-===//
//
// No exceptions: fallible functions return Status or StatusOr<T>. A message
// says what went wrong, where (file, tensor, op) and, when we know, the fix.
//
//===----------------------------------------------------------------------===//

#ifndef MFC_RUNTIME_BASE_STATUS_H
#define MFC_RUNTIME_BASE_STATUS_H

#include <cassert>
#include <cerrno>
#include <optional>
#include <string>
#include <utility>

namespace mfrt {

/// What kind of failure an error is, for callers that act on it (mf-run's
/// exit status, a server deciding whether to retry). The message says the
/// rest.
enum class StatusCode {
  Ok,
  Unknown,            ///< not classified
  InvalidArgument,    ///< input that does not fit: ids, shapes, text, flags
  NotFound,           ///< a file, a tensor, an entry that is not there
  DataLoss,           ///< a file that is corrupt, truncated or malformed
  FailedPrecondition, ///< valid, but not runnable here (CPU features, mode)
  ResourceExhausted,  ///< memory, or a size past a limit
  Unimplemented,      ///< a valid format feature mfc does not read
  Unavailable,        ///< the system or a peer failed (I/O, MPI)
  Internal,           ///< a broken invariant: a bug
};

/// "invalid argument", "not found", ...
inline const char *toString(StatusCode code) {
  switch (code) {
  case StatusCode::Ok:
    return "ok";
  case StatusCode::Unknown:
    return "error";
  case StatusCode::InvalidArgument:
    return "invalid argument";
  case StatusCode::NotFound:
    return "not found";
  case StatusCode::DataLoss:
    return "data loss";
  case StatusCode::FailedPrecondition:
    return "failed precondition";
  case StatusCode::ResourceExhausted:
    return "resource exhausted";
  case StatusCode::Unimplemented:
    return "unimplemented";
  case StatusCode::Unavailable:
    return "unavailable";
  case StatusCode::Internal:
    return "internal";
  }
  return "error";
}

/// The code of a failed system call's errno.
inline StatusCode codeOfErrno(int error) {
  switch (error) {
  case ENOENT:
  case ENOTDIR:
    return StatusCode::NotFound;
  case ENOMEM:
  case ENOSPC:
  case EDQUOT:
  case EFBIG:
    return StatusCode::ResourceExhausted;
  case EACCES:
  case EPERM:
  case EISDIR:
  case EROFS:
    return StatusCode::FailedPrecondition;
  default:
    return StatusCode::Unavailable;
  }
}

class [[nodiscard]] Status {
public:
  static Status ok() { return Status(); }
  static Status error(std::string message) {
    return error(StatusCode::Unknown, std::move(message));
  }
  static Status error(StatusCode code, std::string message) {
    assert(code != StatusCode::Ok && "an error needs an error code");
    Status status;
    status.message_ = std::move(message);
    status.code_ = code;
    return status;
  }

  bool isOk() const { return code_ == StatusCode::Ok; }
  explicit operator bool() const { return isOk(); }
  const std::string &message() const { return message_; }
  StatusCode code() const { return code_; }

  /// Prefixes the message with context: "loading weights: " + message.
  /// The code stays.
  Status withContext(const std::string &context) const {
    return isOk() ? *this : error(code_, context + ": " + message_);
  }

  /// The same error with `code` if it has none yet: a boundary (a file's
  /// loader) classifies what the code beneath it did not.
  Status withDefaultCode(StatusCode code) const {
    return code_ == StatusCode::Unknown ? error(code, message_) : *this;
  }

private:
  std::string message_;
  StatusCode code_ = StatusCode::Ok;
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

/// `lhs = value` of a StatusOr-returning expression, or returns its error
/// from the caller: MFRT_ASSIGN_OR_RETURN(Tensor t, load(path));
#define MFRT_ASSIGN_OR_RETURN(lhs, ...)                                        \
  MFRT_ASSIGN_OR_RETURN_IMPL(MFRT_STATUS_CONCAT(mfrtStatusOr_, __LINE__), lhs, \
                             __VA_ARGS__)
#define MFRT_ASSIGN_OR_RETURN_IMPL(temporary, lhs, ...)                        \
  auto temporary = (__VA_ARGS__);                                              \
  if (!temporary.isOk()) {                                                     \
    return temporary.status();                                                 \
  }                                                                            \
  lhs = temporary.take()
#define MFRT_STATUS_CONCAT(a, b) MFRT_STATUS_CONCAT_INNER(a, b)
#define MFRT_STATUS_CONCAT_INNER(a, b) a##b

#endif // MFC_RUNTIME_BASE_STATUS_H
