// UseReporter tells the local granaryd, in batches, about the reads that
// granary-fuse served without asking it: opens of files the kernel serves
// from a kept descriptor (passthrough) and reads through kept chunk
// descriptors. granaryd counts them as hits and as uses of their files (its
// eviction is least recently used first, so unreported files would go
// first). Each report's answer lists the files granaryd withdrew since the
// report before (reclaimed, or a chunk of them dropped); they go to
// `on_withdrawn`, and so does an answer that cannot list them all (after a
// granaryd restart, or a report that failed), which means "close every kept
// descriptor". Every report also lists the dataset versions the mount
// keeps (`kept_versions`), so that granaryd does not release an older
// version while this mount still shows it or has files of it open.
//
// The first report goes out from Start(), which waits for its answer: it
// says where granaryd's withdrawals stand, and it closes whatever was kept
// before it (files taken over from an earlier granary-fuse), so it must come
// before the mount serves anything, or it would close files handed out since.
// Then reports go every `interval` from a PeriodicThread of the reporter's
// own, and once more when it is destroyed; recording a use is a short critical section
// on the reader's thread, never a round trip.
//
// Thread-safety: Record() may be called concurrently; Start() once, before
// the mount serves.
#ifndef GRANARY_FUSE_CLIENT_READ_PATH_USE_REPORTER_H_
#define GRANARY_FUSE_CLIENT_READ_PATH_USE_REPORTER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "common/base/mutex.h"
#include "common/base/periodic_thread.h"
#include "common/net/local_read_socket.h"
#include "proto/granary.pb.h"

namespace granary::fuse {

class UseReporter {
 public:
  using OnWithdrawn = std::function<void(const v1::WithdrawnFiles&)>;
  using KeptVersions = std::function<std::vector<uint64_t>()>;

  // `local` must outlive the reporter; `kept_versions` is asked at every
  // report, on the reporter's thread.
  UseReporter(LocalChunkReader* local, std::chrono::milliseconds interval, OnWithdrawn on_withdrawn,
              KeptVersions kept_versions);
  ~UseReporter();
  UseReporter(const UseReporter&) = delete;
  UseReporter& operator=(const UseReporter&) = delete;

  // Sends the first report, hands its answer to `on_withdrawn`, and starts
  // the reporting thread.
  void Start();

  // Counts `bytes` over `chunks` chunks of file `file_id` of `dataset_version`
  // as read from the cache.
  void Record(uint64_t dataset_version, uint64_t file_id, uint64_t bytes, uint64_t chunks);

  // Reports sent and answered.
  uint64_t reports() const;

 private:
  using FileKey = std::pair<uint64_t, uint64_t>;  // (dataset version, file id).
  struct Use {
    uint64_t bytes = 0;
    uint64_t chunks = 0;
  };

  // Sends the uses recorded since the last report.
  void SendPending();
  // Sends `uses` in messages of a bounded size, the first with `kept`; false
  // if one failed.
  bool Send(const absl::flat_hash_map<FileKey, Use>& uses, const std::vector<uint64_t>& kept);

  LocalChunkReader* const local_;
  const std::chrono::milliseconds interval_;
  const OnWithdrawn on_withdrawn_;
  const KeptVersions kept_versions_;
  mutable Mutex mutex_;
  absl::flat_hash_map<FileKey, Use> pending_ ABSL_GUARDED_BY(mutex_);
  uint64_t reports_ ABSL_GUARDED_BY(mutex_) = 0;
  uint64_t withdrawn_through_ = 0;             // The reporting thread's alone, once started.
  std::unique_ptr<PeriodicThread> reporting_;  // Set by Start().
};

}  // namespace granary::fuse

#endif  // GRANARY_FUSE_CLIENT_READ_PATH_USE_REPORTER_H_
