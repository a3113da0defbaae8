#include "fuse_client/read_path/open_file.h"

#include "common/dataset/chunk_math.h"

namespace granary::fuse {

absl::StatusOr<std::shared_ptr<const ChunkBytes>> OpenFile::LoadChunk(uint32_t chunk_index,
                                                                      ChunkCache& cache,
                                                                      ChunkFetcher& fetcher,
                                                                      PageStore* page_store) {
  bool fetched_here = false;
  absl::StatusOr<std::shared_ptr<const ChunkBytes>> chunk =
      cache.GetOrFetch(KeyOf(chunk_index), [&]() -> absl::StatusOr<ChunkBytes> {
        ChunkBytes fetched(ChunkLength(entry.size, chunk_size(), chunk_index));
        absl::Status status = fetcher.Fetch(ref(), chunk_index, 0, fetched.span());
        if (!status.ok()) return status;
        fetched_here = true;
        return fetched;
      });
  if (fetched_here && chunk.ok() && page_store != nullptr) {
    page_store->Store(inode, OffsetOf(chunk_index), *chunk);
  }
  return chunk;
}

}  // namespace granary::fuse
