// Error helpers shared by every Granary binary: errno to absl::Status,
// absl::Status to and from grpc::Status with codes that keep their meaning
// across the wire, and which errors of a chunk read another owner may not
// share (readers and granaryd fail over to the next owner on those alone).
//
// Thread-safety: pure functions.
#ifndef GRANARY_COMMON_BASE_STATUS_H_
#define GRANARY_COMMON_BASE_STATUS_H_

#include <string_view>

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace granary {

// An error for a failed system call: the code follows errno (ENOENT → NOT_FOUND,
// EACCES → PERMISSION_DENIED, ENOSPC → RESOURCE_EXHAUSTED, ...) and the message
// is "<context>: <strerror>".
absl::Status ErrnoStatus(int error_number, std::string_view context);

// The same code and message; a message over kMaxErrorMessageBytes is cut.
inline constexpr size_t kMaxErrorMessageBytes = 1024;
grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

// Whether an error from one owner of a chunk is worth asking another owner
// about: not for errors of the request itself (out of range, invalid, a
// changed source, refused), which every owner would give.
bool ShouldTryAnotherOwner(const absl::Status& status);

// Whether a call failed because its server is down or stopping: UNAVAILABLE,
// or CANCELLED (a server stopping cancels the calls it was answering).
bool ServerDownOrStopping(const absl::Status& status);

}  // namespace granary

// Evaluates `expr` (an absl::Status) and returns it from the enclosing function
// when it is not OK.
#define GRANARY_RETURN_IF_ERROR(expr)                  \
  do {                                                 \
    ::absl::Status granary_status_ = (expr);           \
    if (!granary_status_.ok()) return granary_status_; \
  } while (false)

#define GRANARY_STATUS_CONCAT_INNER_(a, b) a##b
#define GRANARY_STATUS_CONCAT_(a, b) GRANARY_STATUS_CONCAT_INNER_(a, b)

// Evaluates `rexpr` (an absl::StatusOr<T>); on error returns its status, else
// moves its value into `lhs` (a declaration such as `auto x` or an lvalue).
#define GRANARY_ASSIGN_OR_RETURN(lhs, rexpr) \
  GRANARY_ASSIGN_OR_RETURN_IMPL_(GRANARY_STATUS_CONCAT_(granary_statusor_, __LINE__), lhs, rexpr)

#define GRANARY_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                                   \
  if (!statusor.ok()) return std::move(statusor).status();   \
  lhs = std::move(statusor).value()

#endif  // GRANARY_COMMON_BASE_STATUS_H_
