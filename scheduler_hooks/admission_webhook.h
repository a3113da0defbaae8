// The Kubernetes mutating admission webhook's logic, on the wire format of
// admission.k8s.io/v1:
//   review  {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
//            "request": {"uid", "kind": {"group", "version", "kind"},
//                        "operation", "namespace", "dryRun", "object": v1.Pod}}
//   answer  {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
//            "response": {"uid", "allowed": true,
//                         ["patchType": "JSONPatch", "patch": base64(RFC 6902)]}}
//
// A pod that is created reading Granary datasets (scheduler_hooks/
// pod_request.h: its Granary CSI volumes and its annotation), and that sets
// no node affinity of its own, is given preferred node affinity towards the
// nodes and cache groups holding them, in the shape of Fluid's
// NodeAffinityWithCache: for each cache group holding some of them, a term
// matching the node label topology.granary.io/group (common/
// kubernetes_names.h) with weight round(100 x kGroupWeight x G), and for each
// of the nodes holding the most, a term matching its metadata.name with
// weight round(100 x kNodeWeight x N), G and N as scheduler_hooks/locality.h
// has them. Any scheduler's NodeAffinity score of a node is the sum of the
// weights it matches, about 100 x L(n): the extender's ranking without the
// extender. Groups of equal weight share one term listing them all and at
// most 16 nodes get a term (a field selector names one node), so a pod gets
// at most 96 terms however large the cluster is. A group whose name cannot
// be a label value gets none: the API server would refuse the pod.
//
// Of the pod's `prewarm_groups` best groups, those not yet complete are then
// warmed with its datasets (through `prewarm`, which must not block), unless
// the review is a dry run (the configuration says sideEffects: NoneOnDryRun).
//
// Admission never depends on Granary: a pod without datasets, with node
// affinity of its own, or whose datasets the cluster does not know, an
// update, another kind of object, a cluster that cannot be reached and a pod
// naming too many datasets are all allowed without a patch (the last two are
// logged, saying so). Only a body that is not an AdmissionReview v1 with a
// request uid is refused (INVALID_ARGUMENT naming what is wrong); the API
// server then applies the configuration's failurePolicy, which
// deploy/kubernetes/webhook.yaml sets to Ignore.
//
// Thread-safety: Review() may be called concurrently if the locator and
// `prewarm` may.
#ifndef GRANARY_SCHEDULER_HOOKS_ADMISSION_WEBHOOK_H_
#define GRANARY_SCHEDULER_HOOKS_ADMISSION_WEBHOOK_H_

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "scheduler_hooks/locator.h"

namespace granary::hooks {

// The largest weight of a preferred scheduling term Kubernetes accepts.
inline constexpr int kMaxTermWeight = 100;

struct AdmissionWebhookOptions {
  // Distinct datasets one pod may name (each costs a Locate call).
  size_t max_datasets_per_pod = 64;
  // How many of the preferred groups are prewarmed for an admitted pod.
  size_t prewarm_groups = 1;
};

class AdmissionWebhook {
 public:
  // Warms `dataset` onto cache group `group`; returns at once.
  using Prewarm = std::function<void(const std::string& dataset, const std::string& group)>;

  AdmissionWebhook(Locator locator, Prewarm prewarm, AdmissionWebhookOptions options);

  // `body` is an AdmissionReview; the answer is the AdmissionReview reply.
  absl::StatusOr<std::string> Review(std::string_view body) const;

 private:
  Locator locator_;
  Prewarm prewarm_;
  AdmissionWebhookOptions options_;
};

}  // namespace granary::hooks

#endif  // GRANARY_SCHEDULER_HOOKS_ADMISSION_WEBHOOK_H_
