// DataFileSyncer makes written data files durable off the write path: on a
// background thread it gathers the data files handed to it for a moment
// (kBatchWindow), flushes each filesystem they lie on once (syncfs; a file
// whose flush fails is fdatasync'ed alone) and then has the batch marked
// synced in the index in one write, so that the next open need not verify
// their chunks. A file written again after it was handed over carries a newer
// write generation; `mark_synced` is told the generation that was synced and
// must not mark a file written since.
//
// Files still queued when the syncer is destroyed stay unmarked; that is safe,
// it only means the next open verifies them.
//
// Thread-safety: Sync() may be called from any thread.
#ifndef GRANARY_CACHE_SERVER_STORE_DATA_FILE_SYNCER_H_
#define GRANARY_CACHE_SERVER_STORE_DATA_FILE_SYNCER_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "cache_server/store/data_file.h"
#include "common/base/mutex.h"

namespace granary::store {

class DataFileSyncer {
 public:
  struct SyncedFile {
    uint64_t id = 0;
    uint64_t generation = 0;
  };
  using MarkSynced = std::function<absl::Status(const std::vector<SyncedFile>& synced)>;

  static constexpr std::chrono::milliseconds kBatchWindow{200};

  // `mark_synced` records that files' bytes up to their write generations
  // are durable; it runs on the syncer's thread.
  explicit DataFileSyncer(MarkSynced mark_synced);
  ~DataFileSyncer();
  DataFileSyncer(const DataFileSyncer&) = delete;
  DataFileSyncer& operator=(const DataFileSyncer&) = delete;

  // Queues a file with no write in flight, written up to `generation`.
  void Sync(std::shared_ptr<DataFile> file, uint64_t generation);

 private:
  void Run();

  const MarkSynced mark_synced_;
  Mutex mu_;
  CondVar wake_;
  std::deque<std::pair<std::shared_ptr<DataFile>, uint64_t>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // Last: starts once the rest exists.
};

}  // namespace granary::store

#endif  // GRANARY_CACHE_SERVER_STORE_DATA_FILE_SYNCER_H_
