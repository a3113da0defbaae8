// OpenFile is the state of one file opened through granary-fuse that outlives
// the FUSE request handling it: the dataset version it belongs to (kept alive
// while the file is open), its manifest entry, where the local granaryd holds
// its chunks, and its source file for fallback reads. Readahead tasks hold it too, so it lives
// until the last of them is done.
//
// Thread-safety: immutable once the open is answered, apart from `source`,
// which is thread-safe.
#ifndef GRANARY_FUSE_CLIENT_READ_PATH_OPEN_FILE_H_
#define GRANARY_FUSE_CLIENT_READ_PATH_OPEN_FILE_H_

#include <chrono>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "common/jobs/job_reads.h"
#include "fuse_client/operations/inode_table.h"
#include "fuse_client/read_path/chunk_cache.h"
#include "fuse_client/read_path/chunk_fetcher.h"
#include "fuse_client/read_path/local_extents.h"
#include "fuse_client/read_path/page_store.h"
#include "fuse_client/read_path/source_file.h"

namespace granary::fuse {

// How long a chunk the local granaryd said it does not hold is read
// elsewhere without asking it again.
inline constexpr std::chrono::milliseconds kLocalMissTtl{1000};

struct OpenFile {
  OpenFile(std::shared_ptr<const MountedDataset> mounted, uint64_t node)
      : dataset(std::move(mounted)),
        inode(dataset->InodeOf(node)),
        file_id(MountedDataset::FileIdOf(node)),
        entry(*dataset->EntryOf(node)),
        source(dataset->snapshot().info.source(), entry) {}

  uint32_t chunk_size() const { return dataset->snapshot().manifest.chunk_size(); }
  ChunkKey KeyOf(uint32_t chunk_index) const {
    return {dataset->snapshot().manifest.version(), file_id, chunk_index};
  }
  FileRef ref() { return {dataset->snapshot(), file_id, source, extents}; }
  // Where chunk `chunk_index` starts in the file.
  uint64_t OffsetOf(uint32_t chunk_index) const { return uint64_t{chunk_index} * chunk_size(); }

  // Whole chunk `chunk_index`, from `cache` or fetched into it; a chunk
  // fetched here is also handed to `page_store`, unless null, for the
  // kernel's page cache.
  absl::StatusOr<std::shared_ptr<const ChunkBytes>> LoadChunk(uint32_t chunk_index,
                                                              ChunkCache& cache,
                                                              ChunkFetcher& fetcher,
                                                              PageStore* page_store);

  const std::shared_ptr<const MountedDataset> dataset;
  const uint64_t inode;
  const uint64_t file_id;
  const ManifestEntry& entry;
  SourceFile source;
  LocalExtents extents{kLocalMissTtl};
  // The kernel's backing file of this open when it is passed through (set
  // before the OPEN reply), else 0.
  int32_t backing_id = 0;
  // What the opener's job read of this dataset (set before the OPEN reply);
  // null when reads are not counted.
  std::shared_ptr<JobReadCounters> job_reads;
};

}  // namespace granary::fuse

#endif  // GRANARY_FUSE_CLIENT_READ_PATH_OPEN_FILE_H_
