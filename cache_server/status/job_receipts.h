// JobReceipts keeps the receipt of each job that ended on this node: every
// dataset version the job read (its manifest's digest) with what it read of
// it (files, bytes by origin, waits, errors), who read, and when the job
// started and ended. A receipt is what makes a training run reproducible:
// which bytes it saw.
//
// A job ends when the scheduler's hook says so (Slurm's epilog or burst
// buffer teardown, the CSI unpublish of a pod's volume): End() turns the
// job's figures, taken out of the JobLedger, into its receipt. Figures of an
// ended job that arrive later (granary-fuse reports every second) are added
// to its receipt (AddLate), as is what a job ended again read since.
//
// Receipts are kept in memory, of the `max_kept` jobs ended most recently. When the
// administrator sets a directory (config receipt_dir), each receipt is also
// written there, as <kind>_<id>.json (slurm_42.json, pod_<uid>.json,
// uid_1000.json) in the JSON of common/reports/job_reads_json.h, replaced whole
// (written aside, then renamed) whenever it grows. Receipt files are mode
// 0640, since a receipt names a job's datasets: granaryd's user and the
// directory's group (when it is setgid) may read them, nobody else. No
// directory: receipts live as long as granaryd keeps them in memory.
//
// Thread-safety: every method may be called concurrently.
#ifndef GRANARY_CACHE_SERVER_STATUS_JOB_RECEIPTS_H_
#define GRANARY_CACHE_SERVER_STATUS_JOB_RECEIPTS_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/base/mutex.h"
#include "proto/jobs.pb.h"

namespace granary {

class JobReceipts {
 public:
  struct Options {
    std::string node_id;
    std::string group;
    // Empty: receipts are kept in memory only.
    std::string directory;
    size_t max_kept = 4096;
  };

  // Checks the directory (created, private, when missing): an absolute path
  // to a directory granaryd may write in. FAILED_PRECONDITION naming
  // receipt_dir, the path and what is wrong otherwise.
  static absl::StatusOr<std::unique_ptr<JobReceipts>> Open(Options options);

  struct Ended {
    v1::JobReceipt receipt;
    std::string path;  // Its file; empty when no directory is set.
  };
  // Ends `job` (a valid job name), which read `reads` (JobLedger::TakeJob)
  // since it started, or since it was last ended; `started_unix_ms` 0: its
  // first read. A job that read nothing yet is remembered with an empty
  // receipt, which figures reported later fill; a receipt is written and
  // shown once it names a read. An error writing the file names it; the
  // receipt is kept all the same.
  absl::StatusOr<Ended> End(std::string_view job, int64_t started_unix_ms,
                            std::vector<v1::JobReads> reads);

  // Adds `figures` (of one job and dataset version) to its job's receipt,
  // if the job has one; false otherwise.
  bool AddLate(const v1::JobReads& figures);

  // The receipt of `job`; NOT_FOUND naming the job and this node when none
  // is kept, or it names no read.
  absl::StatusOr<v1::JobReceipt> Get(std::string_view job) const;

 private:
  explicit JobReceipts(Options options) : options_(std::move(options)) {}

  // Adds `reads` to `receipt`, one entry per dataset version.
  static void AddReads(const std::vector<v1::JobReads>& reads, v1::JobReceipt* receipt);
  // Writes `receipt` to its file; the file's path.
  absl::StatusOr<std::string> Write(const v1::JobReceipt& receipt)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mutex_);

  const Options options_;
  mutable Mutex mutex_;
  absl::flat_hash_map<std::string, v1::JobReceipt> kept_ ABSL_GUARDED_BY(mutex_);
  std::deque<std::string> order_ ABSL_GUARDED_BY(mutex_);  // Oldest first.
  // Receipt files are written one at a time, so that the file holds the
  // latest receipt.
  Mutex write_mutex_;
};

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_STATUS_JOB_RECEIPTS_H_
