#include "fuse_client/read_path/chunk_cache.h"

#include <utility>

namespace granary::fuse {

struct ChunkCache::Slot {
  bool done = false;
  absl::StatusOr<std::shared_ptr<const Chunk>> result;
  CondVar fetched;
  std::list<ChunkKey>::iterator lru_position;  // Valid once done and cached.
};

absl::StatusOr<std::shared_ptr<const Chunk>> ChunkCache::GetOrFetch(const ChunkKey& key,
                                                                    const Fetch& fetch) {
  std::shared_ptr<Slot> slot;
  {
    MutexLock lock(&mutex_);
    auto [it, inserted] = slots_.try_emplace(key);
    if (!inserted) {
      slot = it->second;
      if (slot->done) {
        lru_.splice(lru_.begin(), lru_, slot->lru_position);
        return slot->result;
      }
      while (!slot->done) slot->fetched.Wait(&mutex_);
      return slot->result;
    }
    it->second = slot = std::make_shared<Slot>();
  }

  absl::StatusOr<Chunk> fetched = fetch();
  MutexLock lock(&mutex_);
  slot->done = true;
  if (fetched.ok()) {
    cached_bytes_ += fetched->size;
    slot->result = std::make_shared<const Chunk>(*std::move(fetched));
    lru_.push_front(key);
    slot->lru_position = lru_.begin();
    EvictLocked();
  } else {
    slot->result = fetched.status();
    slots_.erase(key);
  }
  slot->fetched.SignalAll();
  return slot->result;
}

std::shared_ptr<const Chunk> ChunkCache::GetIfCached(const ChunkKey& key) {
  MutexLock lock(&mutex_);
  auto it = slots_.find(key);
  if (it == slots_.end() || !it->second->done) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second->lru_position);
  return *it->second->result;
}

bool ChunkCache::Contains(const ChunkKey& key) {
  MutexLock lock(&mutex_);
  return slots_.contains(key);
}

void ChunkCache::EvictLocked() {
  while (cached_bytes_ > capacity_bytes_ && lru_.size() > 1) {
    auto it = slots_.find(lru_.back());
    cached_bytes_ -= (*it->second->result)->size;
    slots_.erase(it);
    lru_.pop_back();
  }
}

}  // namespace granary::fuse
