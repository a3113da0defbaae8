#include "cache_server/store/aligned_buffer.h"

#include <algorithm>

namespace granary::store {

std::unique_ptr<AlignedBuffer> AlignedBufferPool::Take(uint64_t bytes) {
  {
    MutexLock lock(&mu_);
    auto best = idle_.end();
    for (auto it = idle_.begin(); it != idle_.end(); ++it) {
      if ((*it)->size() >= bytes && (best == idle_.end() || (*it)->size() < (*best)->size())) {
        best = it;
      }
    }
    if (best != idle_.end()) {
      std::unique_ptr<AlignedBuffer> buffer = std::move(*best);
      idle_.erase(best);
      idle_bytes_ -= buffer->size();
      return buffer;
    }
  }
  return std::make_unique<AlignedBuffer>(bytes);
}

void AlignedBufferPool::Give(std::unique_ptr<AlignedBuffer> buffer) {
  MutexLock lock(&mu_);
  idle_bytes_ += buffer->size();
  idle_.push_back(std::move(buffer));
  // Over the limit, the smallest buffers go first: large ones are the costly
  // ones to fault in again.
  std::sort(idle_.begin(), idle_.end(),
            [](const auto& a, const auto& b) { return a->size() > b->size(); });
  while (idle_bytes_ > max_idle_bytes_) {
    idle_bytes_ -= idle_.back()->size();
    idle_.pop_back();
  }
}

}  // namespace granary::store
