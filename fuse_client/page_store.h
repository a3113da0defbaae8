// PageStore copies whole chunks that granary-fuse has fetched into the
// kernel's page cache of their file (FUSE_NOTIFY_STORE), so that the kernel
// answers the next reads of those bytes itself, without a FUSE request each:
// a random reader's later reads near an earlier one cost a page cache hit.
// The kernel reclaims these pages like any other clean page cache,
// so the cache stays bounded by memory pressure, not by us.
//
// Stores run on one background thread: storing a page waits for the page's
// lock, which the kernel holds while a read of that page is in flight, and
// that read may wait on a FUSE worker; a worker must never wait on a store.
// Stores are hints: when the queue is full or the file is no longer known to
// the kernel, a chunk is simply not stored and the reads come through FUSE.
//
// Thread-safety: every method may be called concurrently.
#ifndef GRANARY_FUSE_CLIENT_PAGE_STORE_H_
#define GRANARY_FUSE_CLIENT_PAGE_STORE_H_

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <thread>

#include "common/mutex.h"
#include "fuse_client/chunk_cache.h"

namespace granary::fuse {

class PageStore {
 public:
  // At most `max_queued` chunks wait to be stored; more are dropped.
  explicit PageStore(size_t max_queued);
  ~PageStore();
  PageStore(const PageStore&) = delete;
  PageStore& operator=(const PageStore&) = delete;

  // Starts storing into `session`'s mount; stores asked for before are
  // dropped. Detach() must be called before `session` is destroyed.
  void Attach(fuse_session* session);
  // Stops storing: drops queued chunks and waits for the store in progress.
  void Detach();

  // Stores `chunk` as the bytes of inode `inode` at `offset`, unless the
  // same store is already waiting.
  void Store(uint64_t inode, uint64_t offset, std::shared_ptr<const Chunk> chunk);

  // Chunks stored, and chunks dropped (queue full or the kernel refused).
  uint64_t stored() const;
  uint64_t dropped() const;

 private:
  struct Task {
    uint64_t inode;
    uint64_t offset;
    std::shared_ptr<const Chunk> chunk;
  };

  void Work(fuse_session* session);

  const size_t max_queued_;
  mutable Mutex mutex_;
  CondVar wake_;
  std::deque<Task> queue_ ABSL_GUARDED_BY(mutex_);
  bool attached_ ABSL_GUARDED_BY(mutex_) = false;
  uint64_t stored_ ABSL_GUARDED_BY(mutex_) = 0;
  uint64_t dropped_ ABSL_GUARDED_BY(mutex_) = 0;
  std::thread worker_;
};

}  // namespace granary::fuse

#endif  // GRANARY_FUSE_CLIENT_PAGE_STORE_H_
