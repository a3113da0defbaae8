// FileReader answers the reads of one open file:
//  - a sequential reader reads a chunk the local granaryd holds straight from
//    its store, range by range, as the kernel's readahead asks for them;
//    other chunks it waits for whole, through the chunk cache, with the next
//    `readahead_bytes` worth of them fetched in the background (of local
//    ones, only their disk read is started), since sending the local chunks
//    through the chunk cache only adds a copy;
//  - a random reader's read, and the first read of a stream, of a chunk
//    neither granary-fuse nor the local granaryd holds fetches only its own
//    bytes (granaryd then fetches only the blocks covering them, so a
//    reader at random offsets costs the source about what it asks for);
//  - a random reader's read of a chunk the local granaryd holds, or in the
//    chunk cache, has the whole chunk copied into the kernel's page cache
//    (PageStore, in the background for the former), so the nearby reads
//    that usually follow never reach granary-fuse. Sequential readers'
//    chunks are not copied there (the kernel's readahead asks for the same
//    pages), and a random read does not wait for its whole chunk.
//
// A read continues a sequential stream when it starts at offset 0 or where
// the previous read ended, or when it lies within a chunk of where the stream
// was, or a little behind it, and either the previous read was sequential too
// or it is the second such read in a row (the kernel's parallel readahead
// arrives out of order).
// A stream that has shown itself sequential (a read starting where the one
// before it ended, or a third sequential read in a row) waits for whole
// chunks and gets the next `readahead_bytes` worth of them fetched in the
// background: a lone read at offset 0 (a header, a file's magic number), or
// a read near it after it, is answered as a sequential read but fetches no
// whole chunk and sets off no readahead, nor does one near read after a
// random read, so that readers rarely cause fetches they will not use.
// A reply that lies inside one chunk points into it without a copy.
//
// Thread-safety: Read() may be called concurrently (the kernel issues
// parallel reads of one file).
#ifndef GRANARY_FUSE_CLIENT_READ_PATH_FILE_READER_H_
#define GRANARY_FUSE_CLIENT_READ_PATH_FILE_READER_H_

#include <cstdint>
#include <memory>
#include <span>

#include "absl/status/statusor.h"
#include "common/base/mutex.h"
#include "fuse_client/read_path/chunk_cache.h"
#include "fuse_client/read_path/chunk_fetcher.h"
#include "fuse_client/read_path/open_file.h"
#include "fuse_client/read_path/page_store.h"
#include "fuse_client/read_path/readahead.h"

namespace granary::fuse {

class FileReader {
 public:
  // The shared read path; everything must outlive the reader.
  struct Context {
    ChunkCache* cache;
    ChunkFetcher* fetcher;
    Readahead* readahead;
    PageStore* page_store;
    uint64_t readahead_bytes;
  };

  FileReader(std::shared_ptr<OpenFile> file, const Context& context)
      : file_(std::move(file)), context_(context) {}

  // The bytes of a read: `bytes` points into `hold`. Empty at end of file.
  struct Reply {
    std::shared_ptr<const ChunkBytes> hold;
    std::span<const char> bytes;
  };
  // Reads up to `size` bytes at `offset` (fewer only at end of file).
  // Errors: FAILED_PRECONDITION if the source changed, else the fetcher's.
  absl::StatusOr<Reply> Read(uint64_t offset, size_t size);

  const OpenFile& file() const { return *file_; }

 private:
  // How a read relates to the reads of the file before it.
  struct Stream {
    bool sequential = false;  // It starts or continues a sequential stream.
    bool continued = false;   // The stream has shown itself: readahead pays.
  };
  // Records a read of [offset, end) and says how it relates to those before.
  Stream Record(uint64_t offset, uint64_t end);

  const std::shared_ptr<OpenFile> file_;
  const Context context_;
  Mutex mutex_;
  uint64_t next_offset_ ABSL_GUARDED_BY(mutex_) = 0;
  int near_run_ ABSL_GUARDED_BY(mutex_) = 0;  // Reads in a row within a chunk of next_offset_.
  bool streaming_ ABSL_GUARDED_BY(mutex_) = false;  // The last read was sequential.
  int sequential_run_ ABSL_GUARDED_BY(mutex_) = 0;  // Sequential reads in a row, up to the last.
};

}  // namespace granary::fuse

#endif  // GRANARY_FUSE_CLIENT_READ_PATH_FILE_READER_H_
