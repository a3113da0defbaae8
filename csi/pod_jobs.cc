#include "csi/pod_jobs.h"

#include <chrono>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/base/absl_compat.h"
#include "common/base/logging.h"
#include "common/base/printable.h"
#include "common/jobs/job_identity.h"
#include "grpcpp/client_context.h"

namespace granary::csi_driver {
namespace {

// Ending a job takes one look-up and one small file: a granaryd that does
// not answer in this long is not waited for.
constexpr std::chrono::seconds kEndTimeout{5};

}  // namespace

std::optional<std::string> PodJobOfTarget(std::string_view target_path) {
  const std::vector<absl::string_view> parts =
      absl::StrSplit(AsAbsl(target_path), '/', absl::SkipEmpty());
  for (size_t i = parts.size(); i >= 3; --i) {
    if (parts[i - 3] != "pods" || parts[i - 1] != "volumes") continue;
    std::string job = absl::StrCat("pod:", parts[i - 2]);
    if (ValidateJobName(job).ok()) return job;
  }
  return std::nullopt;
}

void PodJobs::Unpublished(std::string_view target_path) const {
  std::optional<std::string> job = PodJobOfTarget(target_path);
  if (!job) {
    GRANARY_LOG(WARNING) << "target path " << Printable(target_path)
                         << " names no pod (kubelet's <root>/pods/<uid>/volumes/...): no receipt";
    return;
  }
  v1::EndJobRequest request;
  request.set_job(*job);
  v1::EndJobResponse ended;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + kEndTimeout);
  grpc::Status status = jobs_->EndJob(&context, request, &ended);
  if (!status.ok()) {
    GRANARY_LOG(ERROR) << "job " << *job
                       << " not ended, no receipt kept: " << status.error_message();
    return;
  }
  GRANARY_LOG(INFO) << "job " << *job << " ended: receipt of " << ended.receipt().reads_size()
                    << " dataset versions"
                    << (ended.path().empty() ? "" : absl::StrCat(", written to ", ended.path()));
}

}  // namespace granary::csi_driver
