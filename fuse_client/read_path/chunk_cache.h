// ChunkCache is granary-fuse's bounded in-process cache of whole chunks, shared
// by every open file: readahead fills it ahead of sequential readers of chunks
// held by other nodes (local ones are read straight from the store), and
// random readers that come back to a chunk find it here. Concurrent requests
// for one chunk share one fetch (common/base/single_flight.h); a failed fetch is not
// cached, every waiter gets its error and the next request fetches again. When the
// chunks held exceed the capacity, the least recently used are dropped; a
// chunk still referenced by a reader stays alive until that reader is done.
//
// Thread-safety: every method may be called concurrently. The fetch function
// runs on the calling thread without the cache's lock held.
#ifndef GRANARY_FUSE_CLIENT_READ_PATH_CHUNK_CACHE_H_
#define GRANARY_FUSE_CLIENT_READ_PATH_CHUNK_CACHE_H_

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <span>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "common/base/mutex.h"
#include "common/base/single_flight.h"
#include "common/dataset/chunk_key.h"

namespace granary::fuse {

// The bytes of one whole chunk (or of a slice of one, for uncached reads).
struct ChunkBytes {
  explicit ChunkBytes(size_t length) : bytes(new char[length]), size(length) {}
  std::span<char> span() { return {bytes.get(), size}; }
  std::span<const char> span() const { return {bytes.get(), size}; }

  std::unique_ptr<char[]> bytes;  // Left uninitialised: the fetch fills it.
  size_t size;
};

class ChunkCache {
 public:
  explicit ChunkCache(uint64_t capacity_bytes) : capacity_bytes_(capacity_bytes) {}
  ChunkCache(const ChunkCache&) = delete;
  ChunkCache& operator=(const ChunkCache&) = delete;

  using Fetch = std::function<absl::StatusOr<ChunkBytes>()>;

  // The chunk named by `key`: cached, in flight (waits for it) or fetched now
  // with `fetch`.
  absl::StatusOr<std::shared_ptr<const ChunkBytes>> GetOrFetch(const ChunkKey& key,
                                                               const Fetch& fetch);
  // The chunk if it is cached; never waits.
  std::shared_ptr<const ChunkBytes> GetIfCached(const ChunkKey& key);
  // True if `key` is cached or being fetched.
  bool Contains(const ChunkKey& key);

 private:
  struct Cached {
    std::shared_ptr<const ChunkBytes> chunk;
    std::list<ChunkKey>::iterator lru_position;
  };

  // Fetches `key` and caches it; runs as the only fetch of `key` in flight.
  absl::StatusOr<std::shared_ptr<const ChunkBytes>> FetchAndKeep(const ChunkKey& key,
                                                                 const Fetch& fetch);
  void EvictLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  const uint64_t capacity_bytes_;
  SingleFlight<ChunkKey, absl::StatusOr<std::shared_ptr<const ChunkBytes>>> fetches_;
  Mutex mutex_;
  absl::flat_hash_map<ChunkKey, Cached> cached_ ABSL_GUARDED_BY(mutex_);
  // The keys of cached_, most recent first.
  std::list<ChunkKey> lru_ ABSL_GUARDED_BY(mutex_);
  uint64_t cached_bytes_ ABSL_GUARDED_BY(mutex_) = 0;
};

}  // namespace granary::fuse

#endif  // GRANARY_FUSE_CLIENT_READ_PATH_CHUNK_CACHE_H_
