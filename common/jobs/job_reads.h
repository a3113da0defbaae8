// The reads of each job on one node, per dataset version (DESIGN.md,
// "Jobs"): files opened, bytes by origin (common/jobs/read_origin.h), the time
// readers waited (in opens, and in reads by each read's slowest origin, with
// a histogram of read waits), errors, and the uids of the readers.
//
// JobReadCounters are one job's figures for one dataset version: lock-free
// counters that a reader's thread bumps (an open file holds its job's
// counters, so a read costs a few relaxed atomic adds and no lookup).
//
// JobLedger holds the counters of every job and dataset version read lately,
// in bounded memory: at most `max_entries` entries; one idle for
// `idle_after`, or the least recently active one when a new entry would
// exceed the bound, is folded into one "other" entry (its figures summed
// there), so the number of entries, and of the Prometheus series drawn from
// them, stays bounded whatever the number of jobs and versions. Counters
// still held by an open file are never folded.
//
// Three uses: granary-fuse counts into a ledger and sends what was added
// since the last report to granaryd (TakeReport); granaryd adds those
// reports (Merge) and its own batch reads to its ledger, lists its totals
// per job and dataset (Totals), and takes a job's figures per version out
// when the job ends (TakeJob), for its receipt. Figures are as the wire
// carries them (v1::JobReads).
//
// Thread-safety: every method may be called concurrently.
#ifndef GRANARY_COMMON_JOBS_JOB_READS_H_
#define GRANARY_COMMON_JOBS_JOB_READS_H_

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "common/base/mutex.h"
#include "common/jobs/read_origin.h"
#include "proto/jobs.pb.h"

namespace granary {

class JobReadCounters {
 public:
  // Upper bounds of the read-wait histogram's buckets, in seconds; a last
  // bucket (+Inf) follows.
  static constexpr std::array<double, 12> kWaitBounds = {
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 2};

  // One file opened, after `wait_ns` in the open.
  void Opened(int64_t wait_ns);
  // `bytes` read from `origin` in one read that took `wait_ns`; a
  // passthrough open counts its file's size here too (wait 0: its open's
  // time is the open's).
  void Read(ReadOrigin origin, uint64_t bytes, int64_t wait_ns);
  // A read or open that failed.
  void Failed();

  // Adds the figures to `out` (as totals), and zeroes them if `take`.
  void AddTo(v1::JobReads* out, bool take);
  // Adds figures reported elsewhere (a delta, or a folded entry's totals).
  void Merge(const v1::JobReads& figures);

  // When the counters were last bumped or merged into (ms since 1970).
  int64_t last_active_unix_ms() const { return last_active_ms_.load(std::memory_order_relaxed); }

 private:
  void Touch();
  // Keeps `unix_ms` as the first read's time if it is earlier.
  void NoteFirst(int64_t unix_ms);

  std::atomic<uint64_t> files_opened_{0};
  std::atomic<uint64_t> open_wait_ns_{0};
  std::array<std::atomic<uint64_t>, kReadOrigins> bytes_{};
  std::array<std::atomic<uint64_t>, kReadOrigins> wait_ns_{};
  std::array<std::atomic<uint64_t>, kReadOrigins> reads_{};
  std::atomic<uint64_t> errors_{0};
  std::array<std::atomic<uint64_t>, kWaitBounds.size() + 1> wait_buckets_{};
  std::atomic<int64_t> last_active_ms_{0};
  std::atomic<int64_t> first_active_ms_{0};
};

// Adds `figures` to `total` (the same job and dataset version): counts
// summed, the first read the earliest, the last the latest, readers joined.
void AddJobReads(const v1::JobReads& figures, v1::JobReads* total);
// The earlier of two times in ms since 1970, 0 standing for "not yet".
int64_t EarliestKnown(int64_t a_unix_ms, int64_t b_unix_ms);
// Adds to `uids` each of `readers` it lacks.
void JoinReaders(const google::protobuf::RepeatedField<uint32_t>& readers,
                 google::protobuf::RepeatedField<uint32_t>* uids);

class JobLedger {
 public:
  struct Limits {
    size_t max_entries = 256;
    std::chrono::milliseconds idle_after = std::chrono::minutes(10);
  };
  // The name folded jobs are listed under.
  static constexpr std::string_view kOtherJob = "other";
  // Reader uids kept per entry: a job's users, not its processes.
  static constexpr size_t kMaxReaders = 16;

  explicit JobLedger(Limits limits) : limits_(limits) {}
  JobLedger(const JobLedger&) = delete;
  JobLedger& operator=(const JobLedger&) = delete;

  // The counters of `job` reading version `version` of `dataset`, created
  // (folding others if the ledger is full) if it has none; `reader` is the
  // uid of the process that reads, when known.
  std::shared_ptr<JobReadCounters> For(std::string_view job, std::string_view dataset,
                                       uint64_t version = 0,
                                       std::optional<uint32_t> reader = std::nullopt);

  // What was added since the last report, of every entry that changed; the
  // counters are zeroed, and entries idle for idle_after and held by no open
  // file are forgotten.
  v1::JobReadsReport TakeReport();

  // Adds `report`'s figures to their entries (a report's "other" entry, to
  // this ledger's).
  void Merge(const v1::JobReadsReport& report);

  // The totals of every job and dataset (the versions it read summed),
  // busiest (most wait) first, then "other" if any job was folded; entries
  // idle for idle_after are folded first.
  struct Listing {
    std::vector<v1::JobReads> jobs;
    uint64_t folded_jobs = 0;
  };
  Listing Totals();

  // What `job` read, one entry per dataset version with its readers, by
  // dataset then version; the job's entries are zeroed, and forgotten
  // unless an open file still holds them. Empty if the job read nothing.
  std::vector<v1::JobReads> TakeJob(std::string_view job);

  size_t entries() const;

 private:
  using Key = std::tuple<std::string, std::string, uint64_t>;  // Job, dataset, version.
  struct Entry {
    std::shared_ptr<JobReadCounters> counters;
    std::vector<uint32_t> readers;  // At most kMaxReaders.
  };
  using Entries = absl::flat_hash_map<Key, Entry>;

  // Adds `uid` to `entry`'s readers, up to kMaxReaders.
  static void AddReader(uint32_t uid, Entry* entry);
  Entry& FindOrAddLocked(Key key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  // Folds entries idle since `idle_before_ms` and held by nobody else.
  void FoldIdleLocked(int64_t idle_before_ms) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Folds the least recently active entry held by nobody else, if any.
  void FoldOldestLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void FoldLocked(Entries::iterator it) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  const Limits limits_;
  mutable Mutex mutex_;
  Entries entries_ ABSL_GUARDED_BY(mutex_);
  JobReadCounters other_;  // Folded entries' figures.
  uint64_t folded_ ABSL_GUARDED_BY(mutex_) = 0;
};

}  // namespace granary

#endif  // GRANARY_COMMON_JOBS_JOB_READS_H_
