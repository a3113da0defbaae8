#include "cache_server/store/data_file_syncer.h"

#include "common/logging.h"

namespace granary::store {

DataFileSyncer::DataFileSyncer(MarkSynced mark_synced)
    : mark_synced_(std::move(mark_synced)), thread_([this] { Run(); }) {}

DataFileSyncer::~DataFileSyncer() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

void DataFileSyncer::Sync(std::shared_ptr<DataFile> file, uint64_t generation) {
  {
    std::lock_guard lock(mu_);
    queue_.emplace_back(std::move(file), generation);
  }
  wake_.notify_one();
}

void DataFileSyncer::Run() {
  std::unique_lock lock(mu_);
  while (true) {
    wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    auto [file, generation] = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    absl::Status status = file->Sync();
    if (status.ok()) status = mark_synced_(file->id(), generation);
    if (!status.ok()) {
      GRANARY_LOG(WARNING) << "chunk store: cannot sync " << file->path()
                           << ", the next open will verify it: " << status.message();
    }
    file.reset();
    lock.lock();
  }
}

}  // namespace granary::store
