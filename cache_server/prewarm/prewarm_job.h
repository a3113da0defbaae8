// A PrewarmJob fetches chosen files of one dataset version into the local
// store ahead of the jobs that will read them: worker threads (bounded by the
// job's parallelism) walk the chunks, skip those already stored, and fetch the
// rest through ReadThrough (so a prewarm and a reader missing the same chunk
// share one source read). Because stored chunks are skipped, running a job
// again after a crash or a cancellation fetches only what is still missing.
//
// The same job serves fills, which a cold read starts (fill_scheduler.h):
// Prefer() moves the chunks after one a reader just missed to the front of
// the walk (the rest of its file, then the files after it in its directory),
// `yield` holds workers back while readers wait on misses of their own,
// `readers_active` keeps them to those chunks while readers are reading, and
// `wanted` ends the job once its version is removed or refreshed.
//
// A file whose chunk cannot be fetched is recorded as failed once, with the
// error, and its remaining chunks are skipped; other files go on. A chunk
// `admit` refuses stops the whole job (a prewarm that reached its caller's
// share of the cache, prewarm_shares.h). So does a chunk the store did not
// keep once fetched (the cache is full of data it will not evict for it):
// the job stops with RESOURCE_EXHAUSTED naming how much of the dataset the
// node holds and its capacity, rather than report chunks as warmed that are
// not held.
//
// The job holds its manifest while its workers run and lets go of it once
// they are done, so that a finished job kept for its progress does not keep
// the manifest in memory past the catalog's budget (catalog.h).
//
// Thread-safety: Progress(), Prefer(), Cancel() and WaitFor() may be called
// from any thread while the job runs.
#ifndef GRANARY_CACHE_SERVER_PREWARM_PREWARM_JOB_H_
#define GRANARY_CACHE_SERVER_PREWARM_PREWARM_JOB_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cache_server/metrics.h"
#include "cache_server/prewarm/chunk_walk.h"
#include "cache_server/read_path/read_through.h"
#include "cache_server/store/chunk_store.h"
#include "common/base/mutex.h"
#include "common/dataset/manifest.h"
#include "proto/granary.pb.h"

namespace granary {

// The file ids of `manifest` under `paths` (files, or directories meaning
// everything below them); every file when `paths` is empty. INVALID_ARGUMENT
// for a path that is not clean, NOT_FOUND naming a path the manifest lacks.
absl::StatusOr<std::vector<uint64_t>> SelectFiles(const Manifest& manifest,
                                                  const std::vector<std::string>& paths);

class PrewarmJob {
 public:
  // Which chunks this node fetches: in a cluster, the share it owns.
  using ChunkFilter = std::function<bool(const ChunkKey&)>;

  struct Hooks {
    ChunkFilter filter;  // Every chunk when empty.
    // While true for a worker (numbered from 0), it waits; worker 0 never does.
    std::function<bool(unsigned worker)> yield;
    // While true, workers fetch only the chunks Prefer() put first, and wait
    // for more rather than walk on.
    std::function<bool()> readers_active;
    std::function<bool()> wanted;  // Asked now and then; false cancels the job.
    // Asked before a chunk that is not stored is fetched; an error stops the
    // job there, and Stopped() answers it.
    std::function<absl::Status(const ChunkKey&, uint64_t length)> admit;
    // Told of a chunk `admit` let through whose fetch then failed.
    std::function<void(const ChunkKey&)> not_fetched;
  };

  // Starts `parallelism` workers over the chunks of `file_ids` that pass the
  // filter, counting in `metrics`.
  PrewarmJob(std::shared_ptr<const Manifest> manifest, std::vector<uint64_t> file_ids,
             unsigned parallelism, ReadThrough* read_through, store::ChunkStore* store,
             PrewarmMetrics* metrics, Hooks hooks = {});
  // Cancels and joins the workers.
  ~PrewarmJob();
  PrewarmJob(const PrewarmJob&) = delete;
  PrewarmJob& operator=(const PrewarmJob&) = delete;

  // Fetches the chunks that follow `key` in the job's order next.
  void Prefer(const ChunkKey& key);
  // Stops handing out chunks; fetches under way complete.
  void Cancel();
  // Whether every worker has finished, waiting up to `timeout`.
  bool WaitFor(std::chrono::milliseconds timeout);
  // A snapshot; counters never decrease. `finished` is set once all workers
  // are done, with the complete list of failures.
  v1::PrewarmProgress Progress() const;
  // Why `admit` or a chunk the store did not keep stopped the job; OK while
  // neither did.
  absl::Status Stopped() const;

  const std::string& dataset_name() const { return dataset_name_; }

 private:
  void Work(unsigned worker);
  void RecordFailure(const Manifest& manifest, uint64_t file_id, const absl::Status& status);
  // Whether `admit` lets `key` be fetched; stops the job when not.
  bool Admit(const ChunkKey& key, uint64_t length);
  // Stops the job with `why`, unless it was stopped already.
  void Stop(absl::Status why);
  // Why a chunk of `manifest` that was fetched is not held.
  absl::Status NotKept(const Manifest& manifest) const;

  const std::string dataset_name_;
  ReadThrough* const read_through_;
  store::ChunkStore* const store_;
  PrewarmMetrics* const metrics_;
  const Hooks hooks_;
  const std::chrono::steady_clock::time_point started_;
  // The plan is fixed at construction: chunk() and size() need no lock.
  ChunkWalk walk_;
  uint64_t bytes_total_ = 0;

  std::atomic<bool> cancelled_{false};
  std::atomic<uint64_t> bytes_done_{0};
  std::atomic<uint64_t> bytes_fetched_{0};
  std::atomic<uint64_t> chunks_done_{0};
  std::atomic<uint64_t> chunks_already_cached_{0};

  mutable Mutex mu_;
  CondVar finished_;   // The last worker finished.
  CondVar preferred_;  // Prefer() gave the walk a new run.
  unsigned running_workers_ ABSL_GUARDED_BY(mu_) = 0;
  std::shared_ptr<const Manifest> manifest_ ABSL_GUARDED_BY(mu_);  // Null once finished.
  std::vector<v1::FileFailure> failures_ ABSL_GUARDED_BY(mu_);
  absl::Status stopped_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> workers_;
};

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_PREWARM_PREWARM_JOB_H_
