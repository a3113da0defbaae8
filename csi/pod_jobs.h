// PodJobs ends a pod's job on this node when kubelet unpublishes a Granary
// volume from it (NodeUnpublishVolume): the local granaryd turns what the pod
// read into its receipt (proto/jobs.proto EndJob; the job "pod:<uid>", as
// common/jobs/job_identity.h names a pod's reads). The pod is known by the target
// path kubelet gives, <kubelet root>/pods/<pod uid>/volumes/...
//
// Ending the job never fails an unpublish (DESIGN.md invariant 9): a target
// path naming no pod, or a granaryd that cannot be asked, is logged. A pod
// with several Granary volumes is ended once per volume; each end adds what
// the pod read since.
//
// Thread-safety: every method may be called concurrently.
#ifndef GRANARY_CSI_POD_JOBS_H_
#define GRANARY_CSI_POD_JOBS_H_

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "grpcpp/channel.h"
#include "proto/jobs.grpc.pb.h"

namespace granary::csi_driver {

// The job of the pod whose volume is published at `target_path`
// ("pod:<uid>"), if the path is in kubelet's layout.
std::optional<std::string> PodJobOfTarget(std::string_view target_path);

class PodJobs {
 public:
  explicit PodJobs(std::shared_ptr<grpc::Channel> granaryd)
      : jobs_(v1::Jobs::NewStub(std::move(granaryd))) {}

  // Ends the job of the pod whose volume was published at `target_path`.
  void Unpublished(std::string_view target_path) const;

 private:
  std::unique_ptr<v1::Jobs::Stub> jobs_;
};

}  // namespace granary::csi_driver

#endif  // GRANARY_CSI_POD_JOBS_H_
