#include "client/chunk_reads.h"

#include "absl/strings/str_cat.h"
#include "common/dataset/chunk_math.h"

namespace granary {

absl::StatusOr<size_t> ReadFileThroughChunks(const Manifest& manifest, uint64_t file_id,
                                             uint64_t offset, std::span<char> out,
                                             ChunkReadFn read_chunk) {
  const ManifestEntries& entries = manifest.entries();
  if (file_id >= entries.size() || entries[file_id].type != EntryType::kFile) {
    return absl::InvalidArgumentError(absl::StrCat(
        "file id ", file_id, " is not a file of dataset '", manifest.identity().name, "'"));
  }
  size_t done = 0;
  for (const ChunkSlice& slice :
       SliceRange(entries[file_id].size, manifest.chunk_size(), offset, out.size())) {
    ChunkKey key{manifest.version(), file_id, slice.chunk_index};
    absl::Status read =
        read_chunk(key, slice.offset_in_chunk, out.subspan(slice.offset_in_range, slice.length));
    if (!read.ok()) return read;
    done += slice.length;
  }
  return done;
}

}  // namespace granary
