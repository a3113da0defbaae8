// FileReader answers the reads of one open file. It tells sequential readers
// from random ones by where each read starts:
//  - sequential (from offset 0, or where the previous read ended, give or
//    take a chunk for the kernel's out-of-order readahead): whole chunks
//    through the chunk cache, and the next `readahead_bytes` worth of chunks
//    scheduled in the background;
//  - random: a chunk already cached is served from memory; a chunk this file
//    read recently is fetched whole into the cache (nearby reads follow);
//    otherwise just the requested bytes are fetched, so a random 128 KiB read
//    does not cost a whole chunk. (Fetching every random read's whole chunk
//    measured 30x slower on a file twice the cache's size: most chunks were
//    evicted before a second read reached them.)
// A reply that lies inside one cached chunk points into it without a copy.
//
// Thread-safety: Read() may be called concurrently (the kernel issues
// parallel reads of one file).
#ifndef GRANARY_FUSE_CLIENT_FILE_READER_H_
#define GRANARY_FUSE_CLIENT_FILE_READER_H_

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>

#include "absl/status/statusor.h"
#include "fuse_client/chunk_cache.h"
#include "fuse_client/chunk_fetcher.h"
#include "fuse_client/open_file.h"
#include "fuse_client/readahead.h"

namespace granary::fuse {

class FileReader {
 public:
  // The shared read path; everything must outlive the reader.
  struct Context {
    ChunkCache* cache;
    ChunkFetcher* fetcher;
    Readahead* readahead;
    uint64_t readahead_bytes;
  };

  FileReader(std::shared_ptr<OpenFile> file, const Context& context)
      : file_(std::move(file)), context_(context) {}

  // The bytes of a read: `bytes` points into `hold`. Empty at end of file.
  struct Reply {
    std::shared_ptr<const Chunk> hold;
    std::span<const char> bytes;
  };
  // Reads up to `size` bytes at `offset` (fewer only at end of file).
  // Errors: FAILED_PRECONDITION if the source changed, else the fetcher's.
  absl::StatusOr<Reply> Read(uint64_t offset, size_t size);

  const OpenFile& file() const { return *file_; }

 private:
  // Records a read of [offset, end) and says whether it continues a
  // sequential stream. `recent` gets whether its first chunk was read before.
  bool Record(uint64_t offset, uint64_t end, bool* recent);

  const std::shared_ptr<OpenFile> file_;
  const Context context_;
  std::mutex mutex_;
  uint64_t next_offset_ = 0;
  std::array<uint32_t, 8> recent_chunks_{};  // Ring of chunk index + 1; 0 = none.
  size_t recent_next_ = 0;
};

}  // namespace granary::fuse

#endif  // GRANARY_FUSE_CLIENT_FILE_READER_H_
