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
// That wait is uninterruptible: were granary-fuse killed while a store waited
// on a read one of its workers had taken, the store would never end and the
// process never exit, so no successor would start to answer the read. So a
// chunk whose store is due while a read of it is being answered
// (BeginAnswer()) waits until that read is answered (EndAnswer()); what is
// left is a read taken in the moment between that check and the store. (The
// read that fetched a chunk asks for its store while it is being answered
// itself: without the wait, whether the store happened was a race.)
// Stores are hints: when the queue is full or the file is no longer known to
// the kernel, a chunk is simply not stored and the reads come through FUSE.
//
// Thread-safety: every method may be called concurrently.
#ifndef GRANARY_FUSE_CLIENT_READ_PATH_PAGE_STORE_H_
#define GRANARY_FUSE_CLIENT_READ_PATH_PAGE_STORE_H_

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "common/base/mutex.h"
#include "fuse_client/read_path/chunk_cache.h"

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
  void Store(uint64_t inode, uint64_t offset, std::shared_ptr<const ChunkBytes> chunk);

  // A FUSE read of `size` bytes at `offset` of inode `inode` is being
  // answered until the returned token is given to EndAnswer(); stores that
  // overlap it wait meanwhile.
  using Answering = std::multimap<uint64_t, std::pair<uint64_t, uint64_t>>::iterator;
  Answering BeginAnswer(uint64_t inode, uint64_t offset, uint64_t size);
  void EndAnswer(Answering answering);

  // Chunks stored, and chunks dropped (queue full, or the kernel refused).
  uint64_t stored() const;
  uint64_t dropped() const;

 private:
  struct Task {
    uint64_t inode;
    uint64_t offset;
    std::shared_ptr<const ChunkBytes> chunk;
  };

  void Work(fuse_session* session);
  bool AnsweringLocked(const Task& task) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  bool WaitingLocked(uint64_t inode, uint64_t offset) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  const size_t max_queued_;
  mutable Mutex mutex_;
  CondVar wake_;
  std::deque<Task> queue_ ABSL_GUARDED_BY(mutex_);
  // Taken from the queue while a read they overlap was being answered; back
  // in the queue once no such read is.
  std::vector<Task> awaiting_answers_ ABSL_GUARDED_BY(mutex_);
  bool attached_ ABSL_GUARDED_BY(mutex_) = false;
  // Reads being answered: inode -> [begin, end) of the file.
  std::multimap<uint64_t, std::pair<uint64_t, uint64_t>> answering_ ABSL_GUARDED_BY(mutex_);
  uint64_t stored_ ABSL_GUARDED_BY(mutex_) = 0;
  uint64_t dropped_ ABSL_GUARDED_BY(mutex_) = 0;
  std::thread worker_;
};

}  // namespace granary::fuse

#endif  // GRANARY_FUSE_CLIENT_READ_PATH_PAGE_STORE_H_
