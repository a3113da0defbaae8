#include "fuse_client/open_file.h"

#include "common/chunk_math.h"

namespace granary::fuse {

absl::StatusOr<std::shared_ptr<const Chunk>> OpenFile::LoadChunk(uint32_t chunk_index,
                                                                 ChunkCache& cache,
                                                                 ChunkFetcher& fetcher) {
  return cache.GetOrFetch(KeyOf(chunk_index), [&]() -> absl::StatusOr<Chunk> {
    Chunk chunk(ChunkLength(entry.size, chunk_size(), chunk_index));
    absl::Status status = fetcher.Read(ref(), chunk_index, 0, chunk.span());
    if (!status.ok()) return status;
    return chunk;
  });
}

}  // namespace granary::fuse
