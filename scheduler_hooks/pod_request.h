// What a Kubernetes pod asks of Granary. The datasets it reads are those of
// its inline Granary CSI volumes (spec.volumes[].csi with driver
// csi.granary.io: volumeAttributes.dataset), then those its annotation names;
// a volume through a PersistentVolumeClaim is not visible in the pod, so a pod
// reading one names its dataset in the annotation:
//   granary.io/datasets: "imagenet, coco"   datasets the pod reads (comma-separated)
//   granary.io/locality: "required"          only nodes whose cache group holds
//                                            enough of them may run the pod
// Any other value of granary.io/locality (or none) means "preferred": nodes are
// scored, never removed.
//
// Each dataset costs the extender a Locate call, so a pod may name at most a
// configured number of distinct datasets; repeats count once.
//
// Thread-safety: pure function.
#ifndef GRANARY_SCHEDULER_HOOKS_POD_REQUEST_H_
#define GRANARY_SCHEDULER_HOOKS_POD_REQUEST_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace granary::hooks {

inline constexpr char kDatasetsAnnotation[] = "granary.io/datasets";
inline constexpr char kLocalityAnnotation[] = "granary.io/locality";

struct PodRequest {
  std::vector<std::string> datasets;  // Trimmed, without empties or repeats, in order.
  bool locality_required = false;
};

// Reads the volumes and annotations of `pod` (a v1.Pod as JSON). A pod
// without Granary volumes or the annotations above asks for nothing; parts of
// the wrong type are ignored. INVALID_ARGUMENT naming the count and the cap
// when the pod names more than `max_datasets` distinct datasets.
absl::StatusOr<PodRequest> ReadPodRequest(const nlohmann::json& pod, size_t max_datasets);

}  // namespace granary::hooks

#endif  // GRANARY_SCHEDULER_HOOKS_POD_REQUEST_H_
