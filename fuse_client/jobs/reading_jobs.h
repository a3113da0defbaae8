// ReadingJobs is what granary-fuse knows of the jobs reading through its
// mount: which job a request's process belongs to (JobIdentifier, cached per
// process) and what each job read of each dataset version (JobLedger), and
// who read it. An open file
// holds its opener's counters, so its reads are counted with no lookup.
//
// Thread-safety: every method may be called concurrently.
#ifndef GRANARY_FUSE_CLIENT_JOBS_READING_JOBS_H_
#define GRANARY_FUSE_CLIENT_JOBS_READING_JOBS_H_

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string_view>

#include "common/jobs/job_identity.h"
#include "common/jobs/job_reads.h"

namespace granary::fuse {

class ReadingJobs {
 public:
  // A mount's jobs are reported to granaryd every second and forgotten once
  // idle and closed: its ledger only needs the jobs of the moment.
  static constexpr JobLedger::Limits kLimits{.max_entries = 1024,
                                             .idle_after = std::chrono::seconds(30)};

  ReadingJobs() : ledger_(kLimits) {}

  // The counters of the job of process `pid` (run by `uid`) reading
  // version `version` of `dataset`.
  std::shared_ptr<JobReadCounters> CountersFor(pid_t pid, uid_t uid, std::string_view dataset,
                                               uint64_t version) {
    return ledger_.For(identifier_.JobOf(pid, uid), dataset, version, uid);
  }

  JobLedger& ledger() { return ledger_; }

 private:
  JobIdentifier identifier_;
  JobLedger ledger_;
};

}  // namespace granary::fuse

#endif  // GRANARY_FUSE_CLIENT_JOBS_READING_JOBS_H_
