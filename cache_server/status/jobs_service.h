// JobsService is the gRPC face of what jobs read on one granaryd node
// (package granary.v1, proto/jobs.proto): granary-fuse reports what the jobs
// reading through its mount read (ReportJobReads), added to the node's
// JobLedger, and `granary jobs` lists the totals (ListJobs).
//
// A report is taken only from root or granaryd's own user over the Unix
// socket (granary-fuse runs as root), since whoever may report could put
// any figure under any job's name; anyone else gets PERMISSION_DENIED.
// ListJobs is allowed to whoever may ask for the node's status; its answer
// is JobsListing's, which granaryd's status page shows too.
//
// Thread-safety: gRPC calls handlers concurrently; the ledger is thread-safe.
#ifndef GRANARY_CACHE_SERVER_STATUS_JOBS_SERVICE_H_
#define GRANARY_CACHE_SERVER_STATUS_JOBS_SERVICE_H_

#include "cache_server/access/access_policy.h"
#include "cache_server/access/request_authenticator.h"
#include "cache_server/cluster/cluster_view.h"
#include "common/job_reads.h"
#include "proto/jobs.grpc.pb.h"

namespace granary {

// The totals of the jobs that read on node `self`, as ListJobs answers them.
v1::ListJobsResponse JobsListing(JobLedger& jobs, const Member& self);

class JobsService final : public v1::Jobs::Service {
 public:
  // Everything must outlive the service.
  JobsService(JobLedger* jobs, RequestAuthenticator* authenticator, const AccessPolicy* policy,
              const ClusterView* cluster)
      : jobs_(jobs), authenticator_(authenticator), policy_(policy), cluster_(cluster) {}

  grpc::Status ListJobs(grpc::ServerContext* context, const v1::ListJobsRequest* request,
                        v1::ListJobsResponse* response) override;
  grpc::Status ReportJobReads(grpc::ServerContext* context, const v1::JobReadsReport* report,
                              v1::ReportJobReadsResponse* response) override;

 private:
  JobLedger* const jobs_;
  RequestAuthenticator* const authenticator_;
  const AccessPolicy* const policy_;
  const ClusterView* const cluster_;
};

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_STATUS_JOBS_SERVICE_H_
