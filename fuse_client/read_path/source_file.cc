#include "fuse_client/read_path/source_file.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/s3_location.h"
#include "common/source_path.h"

namespace granary::fuse {

std::string SourceFile::Path() const {
  if (IsS3Source(source_)) {
    absl::StatusOr<S3Location> location = ParseS3Source(source_);
    if (!location.ok()) return std::string(source_);
    return absl::StrCat("s3://", location->bucket, "/", location->prefix, entry_.path);
  }
  absl::StatusOr<std::string> root = PosixRootOf(source_);
  if (!root.ok()) return std::string(source_);
  return entry_.path.empty() ? *root
                             : absl::StrCat(*root, root->ends_with('/') ? "" : "/", entry_.path);
}

absl::Status SourceFile::ReadExactly(OpenedSources& sources, uint64_t offset,
                                     std::span<char> out) const {
  absl::StatusOr<std::shared_ptr<const Source>> source = sources.Get(source_);
  if (!source.ok()) {
    return absl::UnavailableError(
        absl::StrCat("cannot read ", Path(), " from its source: ", source.status().message()));
  }
  absl::StatusOr<std::string> data =
      (*source)->ReadRange(entry_, offset, static_cast<uint32_t>(out.size()));
  if (!data.ok()) return data.status();
  std::memcpy(out.data(), data->data(), out.size());
  return absl::OkStatus();
}

}  // namespace granary::fuse
