#include "source/source_kind.h"

#include "absl/strings/str_cat.h"
#include "common/base/absl_compat.h"
#include "common/base/status.h"
#include "common/source_access/s3_location.h"
#include "common/source_access/source_path.h"

namespace granary {

SourceKind KindOf(std::string_view source) {
  return IsS3Source(source) ? SourceKind::kS3 : SourceKind::kPosix;
}

absl::StatusOr<std::string> CanonicalSource(std::string_view source) {
  switch (KindOf(source)) {
    case SourceKind::kPosix:
      return std::string(source);
    case SourceKind::kS3: {
      GRANARY_ASSIGN_OR_RETURN(S3Location location, ParseS3Source(source));
      return FormatS3Source(location);
    }
  }
  return std::string(source);
}

std::string SourcePathOf(std::string_view source, std::string_view path) {
  switch (KindOf(source)) {
    case SourceKind::kPosix: {
      absl::StatusOr<std::string> root = PosixRootOf(source);
      if (!root.ok()) return std::string(source);
      if (path.empty()) return *root;
      return absl::StrCat(*root, root->ends_with('/') ? "" : "/", AsAbsl(path));
    }
    case SourceKind::kS3: {
      absl::StatusOr<S3Location> location = ParseS3Source(source);
      if (!location.ok()) return std::string(source);
      return absl::StrCat("s3://", location->bucket, "/", location->prefix, AsAbsl(path));
    }
  }
  return std::string(source);
}

}  // namespace granary
