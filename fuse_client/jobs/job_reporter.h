// JobReporter sends what the jobs reading through the mount read (the
// mount's JobLedger) to the local granaryd every `interval`, as what was
// added since the report before (Jobs.ReportJobReads, proto/jobs.proto);
// granaryd keeps the totals and publishes them (its /metrics, `granary
// jobs`). A report that fails is dropped (those figures are lost, the mount
// reads on: an accounting error never fails a read); one more report goes
// out when the reporter is destroyed.
//
// Thread-safety: construct and destroy from one thread; the reporter runs
// on a thread of its own.
#ifndef GRANARY_FUSE_CLIENT_JOBS_JOB_REPORTER_H_
#define GRANARY_FUSE_CLIENT_JOBS_JOB_REPORTER_H_

#include <chrono>
#include <memory>

#include "common/base/periodic_thread.h"
#include "common/jobs/job_reads.h"
#include "grpcpp/channel.h"
#include "proto/jobs.grpc.pb.h"

namespace granary::fuse {

class JobReporter {
 public:
  // `ledger` must outlive the reporter; `granaryd` is the local granaryd.
  JobReporter(JobLedger* ledger, std::shared_ptr<grpc::Channel> granaryd,
              std::chrono::milliseconds interval);
  ~JobReporter();
  JobReporter(const JobReporter&) = delete;
  JobReporter& operator=(const JobReporter&) = delete;

 private:
  void SendPending();

  JobLedger* const ledger_;
  const std::unique_ptr<v1::Jobs::Stub> stub_;
  std::unique_ptr<PeriodicThread> reports_;  // Last: starts once the rest exists.
};

}  // namespace granary::fuse

#endif  // GRANARY_FUSE_CLIENT_JOBS_JOB_REPORTER_H_
