#include "cache_server/read_path/write_behind.h"

#include "common/base/logging.h"

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
  const auto length = static_cast<uint32_t>(data->size());
  Queue(Write{key, chunk_size, length, 0, std::move(data)});
}

void WriteBehind::StoreBlocks(const ChunkKey& key, uint32_t chunk_size, uint32_t chunk_length,
                              uint32_t offset, ChunkData data) {
  Queue(Write{key, chunk_size, chunk_length, offset, std::move(data)});
}

void WriteBehind::Queue(Write write) {
  {
    MutexLock lock(&mutex_);
    const uint64_t bytes = write.data->size();
    auto waiting = pending_.find(write.key);
    if (waiting != pending_.end()) {
      for (const Waiting& queued : waiting->second) {
        if (queued.blocks.offset <= write.offset &&
            write.offset + bytes <= queued.blocks.offset + queued.blocks.data->size()) {
          return;
        }
      }
    }
    if (queued_bytes_ + bytes > max_queued_bytes_) {
      metrics_->write_behind_dropped.fetch_add(1, std::memory_order_relaxed);
      GRANARY_LOG_FIRST_N(WARNING, 10)
          << "write-behind queue full (" << queued_bytes_ << " bytes): chunk "
          << write.key.ToString() << " is served but not stored";
      return;
    }
    queued_bytes_ += bytes;
    metrics_->write_behind_bytes.store(static_cast<int64_t>(queued_bytes_),
                                       std::memory_order_relaxed);
    pending_[write.key].push_back(Waiting{{write.data, write.offset}, write.whole()});
    queue_.push_back(std::move(write));
  }
  wake_.Signal();
}

WriteBehind::ChunkData WriteBehind::Pending(const ChunkKey& key) {
  MutexLock lock(&mutex_);
  auto waiting = pending_.find(key);
  if (waiting == pending_.end()) return nullptr;
  for (const Waiting& queued : waiting->second) {
    if (queued.whole) return queued.blocks.data;
  }
  return nullptr;
}

WriteBehind::Blocks WriteBehind::PendingBlocks(const ChunkKey& key, uint64_t offset, uint64_t end) {
  MutexLock lock(&mutex_);
  auto waiting = pending_.find(key);
  if (waiting == pending_.end()) return {};
  for (const Waiting& queued : waiting->second) {
    const Blocks& blocks = queued.blocks;
    if (blocks.offset <= offset && end <= blocks.offset + blocks.data->size()) return blocks;
  }
  return {};
}

std::vector<WriteBehind::Blocks> WriteBehind::PendingOf(const ChunkKey& key) {
  MutexLock lock(&mutex_);
  std::vector<Blocks> pieces;
  if (auto waiting = pending_.find(key); waiting != pending_.end()) {
    for (const Waiting& queued : waiting->second) pieces.push_back(queued.blocks);
  }
  return pieces;
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
    absl::StatusOr<bool> stored =
        write.whole() ? store_->Insert(write.key, write.chunk_size, *write.data)
                      : store_->InsertBlocks(write.key, write.chunk_size, write.chunk_length,
                                             write.offset, *write.data);
    if (!stored.ok()) {
      GRANARY_LOG_FIRST_N(WARNING, 10)
          << "cannot store " << write.key.ToString() << ": " << stored.status();
    }
    mutex_.Lock();
    writing_--;
    queued_bytes_ -= write.data->size();
    metrics_->write_behind_bytes.store(static_cast<int64_t>(queued_bytes_),
                                       std::memory_order_relaxed);
    std::vector<Waiting>& waiting = pending_.at(write.key);
    std::erase_if(waiting, [&](const Waiting& queued) { return queued.blocks.data == write.data; });
    if (waiting.empty()) pending_.erase(write.key);
    written_.SignalAll();
  }
}

}  // namespace granary
