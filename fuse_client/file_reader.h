// FileReader answers the reads of one open file with whole chunks through the
// chunk cache, so nearby reads, sequential or random, are served from memory.
// It tells sequential readers (from offset 0, or where the previous read
// ended, give or take a chunk for the kernel's out-of-order readahead) from
// random ones, and schedules the next `readahead_bytes` worth of chunks in the
// background for the former. A reply that lies inside one chunk points into
// it without a copy.
//
// Thread-safety: Read() may be called concurrently (the kernel issues
// parallel reads of one file).
#ifndef GRANARY_FUSE_CLIENT_FILE_READER_H_
#define GRANARY_FUSE_CLIENT_FILE_READER_H_

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
  // sequential stream.
  bool Record(uint64_t offset, uint64_t end);

  const std::shared_ptr<OpenFile> file_;
  const Context context_;
  std::mutex mutex_;
  uint64_t next_offset_ = 0;
};

}  // namespace granary::fuse

#endif  // GRANARY_FUSE_CLIENT_FILE_READER_H_
