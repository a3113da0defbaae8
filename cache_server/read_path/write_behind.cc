#include "cache_server/read_path/write_behind.h"

#include "common/logging.h"

namespace granary {

WriteBehind::WriteBehind(store::ChunkStore* store, ServerMetrics* metrics,
                         uint64_t max_queued_bytes, int writers)
    : store_(store), metrics_(metrics), max_queued_bytes_(max_queued_bytes) {
  for (int i = 0; i < writers; ++i) writers_.emplace_back([this] { Run(); });
}

WriteBehind::~WriteBehind() {
  {
    MutexLock lock(&mutex_);
    stopping_ = true;
  }
  wake_.SignalAll();
  for (std::thread& writer : writers_) writer.join();
}

void WriteBehind::Store(const ChunkKey& key, uint32_t chunk_size, ChunkData data) {
  {
    MutexLock lock(&mutex_);
    if (pending_.contains(key)) return;
    if (queued_bytes_ + data->size() > max_queued_bytes_) {
      metrics_->write_behind_dropped.fetch_add(1, std::memory_order_relaxed);
      GRANARY_LOG_FIRST_N(WARNING, 10)
          << "write-behind queue full (" << queued_bytes_ << " bytes): chunk " << key.ToString()
          << " is served but not stored";
      return;
    }
    queued_bytes_ += data->size();
    metrics_->write_behind_bytes.store(static_cast<int64_t>(queued_bytes_),
                                       std::memory_order_relaxed);
    pending_.emplace(key, data);
    queue_.push_back(Write{key, chunk_size, std::move(data)});
  }
  wake_.Signal();
}

WriteBehind::ChunkData WriteBehind::Pending(const ChunkKey& key) {
  MutexLock lock(&mutex_);
  auto it = pending_.find(key);
  return it == pending_.end() ? nullptr : it->second;
}

void WriteBehind::Drain() {
  MutexLock lock(&mutex_);
  while (!queue_.empty() || writing_ > 0) written_.Wait(&mutex_);
}

void WriteBehind::Run() {
  MutexLock lock(&mutex_);
  for (;;) {
    while (!stopping_ && queue_.empty()) wake_.Wait(&mutex_);
    if (queue_.empty()) return;  // Stopping, and everything is stored.
    Write write = std::move(queue_.front());
    queue_.pop_front();
    writing_++;
    mutex_.Unlock();
    absl::StatusOr<bool> stored = store_->Insert(write.key, write.chunk_size, *write.data);
    if (!stored.ok()) {
      GRANARY_LOG_FIRST_N(WARNING, 10)
          << "cannot store " << write.key.ToString() << ": " << stored.status();
    }
    mutex_.Lock();
    writing_--;
    queued_bytes_ -= write.data->size();
    metrics_->write_behind_bytes.store(static_cast<int64_t>(queued_bytes_),
                                       std::memory_order_relaxed);
    pending_.erase(write.key);
    written_.SignalAll();
  }
}

}  // namespace granary
