#include "source/s3_source.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "common/base/filled_string.h"
#include "common/base/status.h"
#include "source/s3_tree.h"

namespace granary {

absl::StatusOr<ScannedTree> S3Source::Scan(size_t max_entries) const {
  const S3Location& location = client_->location();
  std::vector<S3Object> objects;
  std::string token;
  do {
    GRANARY_ASSIGN_OR_RETURN(S3ListPage page, client_->ListPage(token));
    for (S3Object& object : page.objects) objects.push_back(std::move(object));
    if (objects.size() >= max_entries) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "s3://", location.bucket, "/", location.prefix, " holds over ", max_entries - 1,
          " objects, the most a dataset may have (max_dataset_entries)"));
    }
    token = std::move(page.next_continuation_token);
  } while (!token.empty());
  ScannedTree tree = TreeOfObjects(objects, location);
  if (tree.entries.size() > max_entries) {
    return absl::ResourceExhaustedError(
        absl::StrCat("s3://", location.bucket, "/", location.prefix, " makes ", tree.entries.size(),
                     " files and directories, over the most a dataset may have (", max_entries,
                     ", max_dataset_entries)"));
  }
  return tree;
}

absl::StatusOr<std::string> S3Source::ReadRange(const ManifestEntry& entry, uint64_t offset,
                                                uint32_t length) const {
  return FilledString(length, [&](std::span<char> out) {
    return client_->GetRange(absl::StrCat(client_->location().prefix, entry.path), entry.etag(),
                             entry.size, offset, out);
  });
}

}  // namespace granary
