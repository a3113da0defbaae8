// The Kubernetes scheduler extender's logic, on the wire format of
// k8s.io/kube-scheduler/extender/v1 (Go's encoding of its types, which carry no
// json tags, hence the capitalised field names):
//   request  ExtenderArgs          {"Pod": v1.Pod, "Nodes": v1.NodeList|null,
//                                   "NodeNames": [string]|null}
//   filter   ExtenderFilterResult  {"Nodes", "NodeNames", "FailedNodes",
//                                   "FailedAndUnresolvableNodes", "Error"}
//   prioritize HostPriorityList    [{"Host": string, "Score": 0..10}]
// A reply uses the form of its request: NodeNames when the scheduler sent names
// (nodeCacheCapable: true), else the NodeList with the passing nodes' objects
// unchanged.
//
// Scores are those of scheduler_hooks/locality.h over the pod's datasets
// (scheduler_hooks/pod_request.h). Filter removes nodes only for a pod with
// granary.io/locality: required, and then those whose cache group holds less
// than `required_group_share` of the pod's dataset bytes; they are reported in
// FailedAndUnresolvableNodes, since preempting pods would not bring data there.
// A pod without datasets, datasets the cluster does not know, or a cluster that
// cannot be reached give neutral answers (every node passes, every score 0),
// never an error: scheduling must not depend on the cache being up. A body
// that is not an ExtenderArgs is an error. A pod naming more than
// `max_datasets_per_pod` distinct datasets is refused without a single Locate
// call: Filter answers with the refusal in its Error field, as the wire format
// provides; a HostPriorityList has no such field, so Prioritize fails.
//
// Thread-safety: Filter() and Prioritize() may be called concurrently if the
// locator may.
#ifndef GRANARY_SCHEDULER_HOOKS_EXTENDER_H_
#define GRANARY_SCHEDULER_HOOKS_EXTENDER_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "proto/granary.pb.h"
#include "scheduler_hooks/locator.h"

namespace granary::hooks {

struct ExtenderOptions {
  // Filter's threshold for pods that require locality: the share (0..1) of
  // their dataset bytes the node's cache group must hold.
  double required_group_share = 0.5;
  // Distinct datasets one pod may name (each costs a Locate call).
  size_t max_datasets_per_pod = 64;
};

class Extender {
 public:
  Extender(Locator locator, ExtenderOptions options);

  // `body` is an ExtenderArgs; the answer is the JSON reply.
  // INVALID_ARGUMENT naming the problem when the body is not an ExtenderArgs,
  // and from Prioritize when the pod names too many datasets.
  absl::StatusOr<std::string> Filter(std::string_view body) const;
  absl::StatusOr<std::string> Prioritize(std::string_view body) const;

 private:
  Locator locator_;
  ExtenderOptions options_;
};

}  // namespace granary::hooks

#endif  // GRANARY_SCHEDULER_HOOKS_EXTENDER_H_
