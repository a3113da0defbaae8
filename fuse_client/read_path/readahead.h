// Readahead fetches chunks into the chunk cache (and so the kernel's page
// cache) in the background, on a fixed pool of threads: the next chunks of a
// sequential reader, fetched in parallel while it consumes the current one,
// and the whole chunk around a random reader's read. Of the chunks the local
// granaryd holds, a sequential reader reads its ranges from the store itself
// (FileReader), so for those only their disk read is started here.
// Requests for chunks already cached, in flight, queued or recently
// prefetched are dropped, and so are requests beyond a bounded queue:
// readahead is a hint, never a backlog.
//
// Thread-safety: Schedule() may be called concurrently. The destructor waits
// for running fetches and drops queued ones.
#ifndef GRANARY_FUSE_CLIENT_READ_PATH_READAHEAD_H_
#define GRANARY_FUSE_CLIENT_READ_PATH_READAHEAD_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "common/base/mutex.h"
#include "common/dataset/chunk_key.h"
#include "fuse_client/read_path/chunk_cache.h"
#include "fuse_client/read_path/chunk_fetcher.h"
#include "fuse_client/read_path/open_file.h"
#include "fuse_client/read_path/page_store.h"

namespace granary::fuse {

class Readahead {
 public:
  // `cache`, `fetcher` and `page_store` must outlive this object.
  Readahead(int threads, ChunkCache* cache, ChunkFetcher* fetcher, PageStore* page_store);
  ~Readahead();
  Readahead(const Readahead&) = delete;
  Readahead& operator=(const Readahead&) = delete;

  // Fetches chunk `chunk_index` of `file` into the cache unless it is there,
  // and then into the kernel's page cache if `into_page_cache`.
  void Schedule(std::shared_ptr<OpenFile> file, uint32_t chunk_index, bool into_page_cache);

 private:
  struct Task {
    std::shared_ptr<OpenFile> file;
    uint32_t chunk_index;
    bool into_page_cache;
  };

  void Work();
  // Remembers that `key`'s disk read was started, forgetting the oldest of
  // kRememberedPrefetches.
  void RememberPrefetchLocked(const ChunkKey& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  ChunkCache* const cache_;
  ChunkFetcher* const fetcher_;
  PageStore* const page_store_;
  const size_t max_queued_;
  Mutex mutex_;
  CondVar wake_;
  std::deque<Task> queue_ ABSL_GUARDED_BY(mutex_);
  // Local chunks whose disk read was started lately. A sequential reader
  // schedules its whole window on every read, and the next epoch reads the
  // same chunks again; scheduling each chunk once per stream instead, which
  // prefetched again every epoch, measured slower (commit 6d271dc).
  absl::flat_hash_set<ChunkKey> prefetched_ ABSL_GUARDED_BY(mutex_);
  std::deque<ChunkKey> prefetch_order_ ABSL_GUARDED_BY(mutex_);  // prefetched_, oldest first.
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace granary::fuse

#endif  // GRANARY_FUSE_CLIENT_READ_PATH_READAHEAD_H_
