#include "cache_server/store/segment_sealer.h"

#include "common/logging.h"

namespace granary::store {

SegmentSealer::SegmentSealer(std::function<absl::Status(uint64_t segment_id)> mark_sealed)
    : mark_sealed_(std::move(mark_sealed)), thread_([this] { Run(); }) {}

SegmentSealer::~SegmentSealer() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

void SegmentSealer::Seal(std::shared_ptr<SegmentFile> segment) {
  {
    std::lock_guard lock(mu_);
    queue_.push_back(std::move(segment));
  }
  wake_.notify_one();
}

void SegmentSealer::Run() {
  std::unique_lock lock(mu_);
  while (true) {
    wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    std::shared_ptr<SegmentFile> segment = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    absl::Status status = segment->Sync();
    if (status.ok()) status = mark_sealed_(segment->id());
    if (!status.ok()) {
      GRANARY_LOG(WARNING) << "chunk store: cannot seal " << segment->path()
                           << ", the next open will verify it: " << status.message();
    }
    segment.reset();
    lock.lock();
  }
}

}  // namespace granary::store
