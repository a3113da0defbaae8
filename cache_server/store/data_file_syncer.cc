#include "cache_server/store/data_file_syncer.h"

#include <sys/stat.h>

#include <map>
#include <vector>

#include "common/base/logging.h"

namespace granary::store {

DataFileSyncer::DataFileSyncer(MarkSynced mark_synced)
    : mark_synced_(std::move(mark_synced)), thread_([this] { Run(); }) {}

DataFileSyncer::~DataFileSyncer() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  wake_.Signal();
  thread_.join();
}

void DataFileSyncer::Sync(std::shared_ptr<DataFile> file, uint64_t generation) {
  {
    MutexLock lock(&mu_);
    queue_.emplace_back(std::move(file), generation);
  }
  wake_.Signal();
}

void DataFileSyncer::Run() {
  MutexLock lock(&mu_);
  while (true) {
    while (!stopping_ && queue_.empty()) wake_.Wait(&mu_);
    if (stopping_) return;
    // Files written meanwhile join the batch: one flush of the filesystem
    // makes them all durable, where a flush per file (thousands a second
    // when small files arrive) held up every other read of the disk.
    wake_.WaitFor(&mu_, kBatchWindow,
                  [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; });
    if (stopping_) return;
    std::deque<std::pair<std::shared_ptr<DataFile>, uint64_t>> batch;
    batch.swap(queue_);
    mu_.Unlock();
    std::map<dev_t, absl::Status> flushed;  // By filesystem.
    std::vector<SyncedFile> synced;
    for (auto& [file, generation] : batch) {
      absl::StatusOr<struct stat> st = file->Stat();
      // Reclaimed since it was written: nothing left to make durable.
      if (absl::IsNotFound(st.status())) continue;
      absl::Status status = st.status();
      if (status.ok()) {
        auto [it, first] = flushed.try_emplace(st->st_dev);
        if (first) it->second = file->SyncFilesystem();
        status = it->second;
      }
      if (!status.ok()) status = file->Sync();
      if (status.ok()) {
        synced.push_back({file->id(), generation});
      } else {
        GRANARY_LOG(WARNING) << "chunk store: cannot sync " << file->path()
                             << ", the next open will verify it: " << status.message();
      }
      file.reset();
    }
    if (absl::Status marked = synced.empty() ? absl::OkStatus() : mark_synced_(synced);
        !marked.ok()) {
      GRANARY_LOG(WARNING) << "chunk store: cannot mark " << synced.size()
                           << " data files synced, the next open will verify them: "
                           << marked.message();
    }
    mu_.Lock();
  }
}

}  // namespace granary::store
