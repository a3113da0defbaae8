#include "fuse_client/read_path/source_file.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "source/source_kind.h"

namespace granary::fuse {

std::string SourceFile::Path() const { return SourcePathOf(source_, entry_.path); }

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
