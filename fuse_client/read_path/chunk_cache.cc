#include "fuse_client/read_path/chunk_cache.h"

#include <utility>

namespace granary::fuse {

absl::StatusOr<std::shared_ptr<const ChunkBytes>> ChunkCache::GetOrFetch(const ChunkKey& key,
                                                                         const Fetch& fetch) {
  if (std::shared_ptr<const ChunkBytes> cached = GetIfCached(key)) return cached;
  return fetches_.Do(key, [&] { return FetchAndKeep(key, fetch); });
}

absl::StatusOr<std::shared_ptr<const ChunkBytes>> ChunkCache::FetchAndKeep(const ChunkKey& key,
                                                                           const Fetch& fetch) {
  // A fetch of `key` that ended after GetOrFetch looked has cached it.
  if (std::shared_ptr<const ChunkBytes> cached = GetIfCached(key)) return cached;
  absl::StatusOr<ChunkBytes> fetched = fetch();
  if (!fetched.ok()) return fetched.status();
  auto chunk = std::make_shared<const ChunkBytes>(*std::move(fetched));
  MutexLock lock(&mutex_);
  lru_.push_front(key);
  cached_.try_emplace(key, Cached{chunk, lru_.begin()});
  cached_bytes_ += chunk->size;
  EvictLocked();
  return chunk;
}

std::shared_ptr<const ChunkBytes> ChunkCache::GetIfCached(const ChunkKey& key) {
  MutexLock lock(&mutex_);
  auto it = cached_.find(key);
  if (it == cached_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second.lru_position);
  return it->second.chunk;
}

bool ChunkCache::Contains(const ChunkKey& key) {
  // In this order: a fetch caches its chunk before it stops being in flight.
  if (fetches_.InFlight(key)) return true;
  MutexLock lock(&mutex_);
  return cached_.contains(key);
}

void ChunkCache::EvictLocked() {
  while (cached_bytes_ > capacity_bytes_ && lru_.size() > 1) {
    auto it = cached_.find(lru_.back());
    cached_bytes_ -= it->second.chunk->size;
    cached_.erase(it);
    lru_.pop_back();
  }
}

}  // namespace granary::fuse
