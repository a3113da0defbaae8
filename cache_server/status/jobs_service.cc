#include "cache_server/status/jobs_service.h"

#include <unistd.h>

#include <utility>

#include "cache_server/access/call_authorization.h"
#include "common/status.h"

namespace granary {

v1::ListJobsResponse JobsListing(JobLedger& jobs, const Member& self) {
  v1::ListJobsResponse response;
  response.set_node_id(self.id);
  response.set_group(self.group);
  JobLedger::Listing listing = jobs.Totals();
  for (v1::JobReads& job : listing.jobs) *response.add_jobs() = std::move(job);
  response.set_folded_jobs(listing.folded_jobs);
  return response;
}

grpc::Status JobsService::ListJobs(grpc::ServerContext* context, const v1::ListJobsRequest*,
                                   v1::ListJobsResponse* response) {
  absl::StatusOr<Caller> caller = AuthorizeCall(*authenticator_, *policy_, *context, "ListJobs",
                                                AccessPolicy::Action::kDescribe);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  *response = JobsListing(*jobs_, cluster_->self());
  return grpc::Status::OK;
}

grpc::Status JobsService::ReportJobReads(grpc::ServerContext* context,
                                         const v1::JobReadsReport* report,
                                         v1::ReportJobReadsResponse*) {
  absl::StatusOr<Caller> caller = authenticator_->Authenticate(*context, "ReportJobReads");
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  const uid_t uid = caller->credentials.uid;
  if (caller->channel != Caller::Channel::kUnixSocket || (uid != 0 && uid != ::geteuid())) {
    return ToGrpcStatus(absl::PermissionDeniedError(
        "only root and granaryd's own user may report what jobs read, over the Unix socket"));
  }
  jobs_->Merge(*report);
  return grpc::Status::OK;
}

}  // namespace granary
