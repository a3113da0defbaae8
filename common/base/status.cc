#include "common/base/status.h"

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/base/absl_compat.h"

namespace granary {
namespace {

absl::StatusCode CodeForErrno(int error_number) {
  switch (error_number) {
    case ENOENT:
    case ENOTDIR:
      return absl::StatusCode::kNotFound;
    case EACCES:
    case EPERM:
    case EROFS:
      return absl::StatusCode::kPermissionDenied;
    case ENOSPC:
    case EDQUOT:
    case ENOMEM:
    case EMFILE:
    case ENFILE:
      return absl::StatusCode::kResourceExhausted;
    case EEXIST:
      return absl::StatusCode::kAlreadyExists;
    case EINVAL:
    case ENAMETOOLONG:
    case ELOOP:
      return absl::StatusCode::kInvalidArgument;
    case EAGAIN:
    case EINTR:
    case EBUSY:
      return absl::StatusCode::kUnavailable;
    case ESTALE:
      return absl::StatusCode::kFailedPrecondition;
    default:
      return absl::StatusCode::kInternal;
  }
}

}  // namespace

absl::Status ErrnoStatus(int error_number, std::string_view context) {
  return absl::Status(CodeForErrno(error_number),
                      absl::StrCat(AsAbsl(context), ": ", std::strerror(error_number)));
}

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  // A message travels in the reply's metadata, which has a size limit: one
  // that echoes a long input must not make the reply itself fail.
  absl::string_view message = status.message();
  std::string bounded(message.substr(0, kMaxErrorMessageBytes));
  if (message.size() > kMaxErrorMessageBytes) absl::StrAppend(&bounded, "... (cut)");
  // absl::StatusCode and grpc::StatusCode share their numeric values.
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::move(bounded));
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

bool ShouldTryAnotherOwner(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kPermissionDenied:
      return false;
    default:
      return !status.ok();
  }
}

bool ServerDownOrStopping(const absl::Status& status) {
  return absl::IsUnavailable(status) || absl::IsCancelled(status);
}

}  // namespace granary
