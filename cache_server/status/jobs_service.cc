#include "cache_server/status/jobs_service.h"

#include <unistd.h>

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "cache_server/access/call_authorization.h"
#include "common/base/printable.h"
#include "common/base/status.h"
#include "common/jobs/job_identity.h"

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
  v1::JobReadsReport running;
  for (const v1::JobReads& reads : report->jobs()) {
    if (!receipts_->AddLate(reads)) *running.add_jobs() = reads;
  }
  jobs_->Merge(running);
  return grpc::Status::OK;
}

grpc::Status JobsService::EndJob(grpc::ServerContext* context, const v1::EndJobRequest* request,
                                 v1::EndJobResponse* response) {
  const std::string change = absl::StrCat("end job ", Printable(request->job()));
  absl::StatusOr<Caller> caller = AuthorizeCall(*authenticator_, *policy_, *context, "EndJob",
                                                AccessPolicy::Action::kAdminister, change);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  absl::StatusOr<JobReceipts::Ended> ended;
  if (absl::Status valid = ValidateJobName(request->job()); valid.ok()) {
    ended =
        receipts_->End(request->job(), request->started_unix_ms(), jobs_->TakeJob(request->job()));
  } else {
    ended = valid;
  }
  Audit(*caller, change, ended.status());
  if (!ended.ok()) return ToGrpcStatus(ended.status());
  *response->mutable_receipt() = std::move(ended->receipt);
  response->set_path(std::move(ended->path));
  return grpc::Status::OK;
}

grpc::Status JobsService::GetReceipt(grpc::ServerContext* context,
                                     const v1::GetReceiptRequest* request,
                                     v1::JobReceipt* response) {
  absl::StatusOr<Caller> caller = AuthorizeCall(*authenticator_, *policy_, *context, "GetReceipt",
                                                AccessPolicy::Action::kDescribe);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  if (absl::Status valid = ValidateJobName(request->job()); !valid.ok()) {
    return ToGrpcStatus(valid);
  }
  absl::StatusOr<v1::JobReceipt> receipt = receipts_->Get(request->job());
  if (!receipt.ok()) return ToGrpcStatus(receipt.status());
  const bool trusted =
      policy_->Allow(*caller, AccessPolicy::Action::kAdminister, "GetReceipt").ok();
  const auto& readers = receipt->reader_uids();
  if (!trusted &&
      std::find(readers.begin(), readers.end(), caller->credentials.uid) == readers.end()) {
    return ToGrpcStatus(absl::PermissionDeniedError(
        absl::StrCat(DescribeCaller(*caller), " may not read the receipt of job '", request->job(),
                     "': only administrators and the users who read in the job may")));
  }
  *response = *std::move(receipt);
  return grpc::Status::OK;
}

}  // namespace granary
