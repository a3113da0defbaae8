// WriteBehind stores fetched chunks, and blocks of chunks (a reader's miss of
// part of one), after their readers have been answered: a miss costs the
// reader the source read, not the store's write too. Writes wait in a queue
// bounded by bytes, and `writers` threads store them in the order they came.
// While a chunk or blocks wait, Pending() and PendingBlocks() serve them
// from memory, so no second reader fetches them again. When the queue is full
// the chunk is not stored at all (counted): readers are always answered, and
// the chunk is fetched again by a later miss or by a fill.
//
// Nothing half-written is ever served: the store writes a chunk's bytes before
// its index entry (store/chunk_store.h), so a crash loses queued chunks, never
// correctness.
//
// Thread-safety: every method may be called concurrently. The destructor
// stores what is still queued, then joins the writers.
#ifndef GRANARY_CACHE_SERVER_READ_PATH_WRITE_BEHIND_H_
#define GRANARY_CACHE_SERVER_READ_PATH_WRITE_BEHIND_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "cache_server/metrics.h"
#include "cache_server/store/chunk_store.h"
#include "common/base/mutex.h"
#include "common/dataset/chunk_key.h"

namespace granary {

class WriteBehind {
 public:
  using ChunkData = std::shared_ptr<const std::string>;

  // `store` and `metrics` must outlive this object.
  WriteBehind(store::ChunkStore* store, ServerMetrics* metrics, uint64_t max_queued_bytes,
              int writers);
  ~WriteBehind();
  WriteBehind(const WriteBehind&) = delete;
  WriteBehind& operator=(const WriteBehind&) = delete;

  // Queues `data`, chunk `key` of a version whose chunks are `chunk_size`
  // bytes, for the store; dropped (and counted) when the queue is full.
  void Store(const ChunkKey& key, uint32_t chunk_size, ChunkData data);
  // Queues `data`, bytes [offset, offset + data.size()) of chunk `key`
  // (`chunk_length` bytes, of a version with chunks of `chunk_size`), for
  // ChunkStore::InsertBlocks(); dropped (and counted) when the queue is full.
  void StoreBlocks(const ChunkKey& key, uint32_t chunk_size, uint32_t chunk_length, uint32_t offset,
                   ChunkData data);
  // The bytes of `key` while they wait to be stored whole; null otherwise.
  ChunkData Pending(const ChunkKey& key);
  // Bytes of chunk `key` waiting to be stored, whole or as blocks, that
  // cover [offset, end) of it, and where they start in the chunk; null
  // `data` when none do.
  struct Blocks {
    ChunkData data;
    uint32_t offset = 0;
  };
  Blocks PendingBlocks(const ChunkKey& key, uint64_t offset, uint64_t end);
  // Every piece of chunk `key` waiting to be stored, whole or as blocks.
  std::vector<Blocks> PendingOf(const ChunkKey& key);
  // Waits until every chunk queued so far is stored (or failed to be).
  void Drain();

 private:
  struct Write {
    ChunkKey key;
    uint32_t chunk_size;
    uint32_t chunk_length;  // Of the whole chunk.
    uint32_t offset;        // Of `data` in the chunk: 0 for a whole chunk.
    ChunkData data;
    bool whole() const { return offset == 0 && data->size() == chunk_length; }
  };

  // Queues `write` unless what it holds waits already.
  void Queue(Write write);
  void Run();

  store::ChunkStore* const store_;
  ServerMetrics* const metrics_;
  const uint64_t max_queued_bytes_;
  Mutex mutex_;
  CondVar wake_;     // Work queued, or stopping.
  CondVar written_;  // A write finished.
  std::deque<Write> queue_ ABSL_GUARDED_BY(mutex_);
  // A write queued or being written.
  struct Waiting {
    Blocks blocks;
    bool whole;
  };
  absl::flat_hash_map<ChunkKey, std::vector<Waiting>> pending_ ABSL_GUARDED_BY(mutex_);
  uint64_t queued_bytes_ ABSL_GUARDED_BY(mutex_) = 0;
  int writing_ ABSL_GUARDED_BY(mutex_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  std::vector<std::thread> writers_;
};

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_READ_PATH_WRITE_BEHIND_H_
