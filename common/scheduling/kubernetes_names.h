// The names Granary's Kubernetes parts agree on: granary-csi publishes
// datasets under its driver name and reads the dataset from a volume's
// attributes, and reports each node's cache group as a topology segment,
// which kubelet turns into a label of the node; the admission webhook finds a
// pod's datasets by the first two and prefers nodes by the label.
//
// Thread-safety: constants.
#ifndef GRANARY_COMMON_SCHEDULING_KUBERNETES_NAMES_H_
#define GRANARY_COMMON_SCHEDULING_KUBERNETES_NAMES_H_

namespace granary {

// The CSI driver's name: the CSIDriver object's and every Granary volume's
// spec.csi.driver.
inline constexpr char kDriverName[] = "csi.granary.io";
// The volumeAttributes key naming the dataset a volume publishes.
inline constexpr char kDatasetAttribute[] = "dataset";
// The topology key, and so the node label, holding a node's cache group.
inline constexpr char kGroupTopologyKey[] = "topology.granary.io/group";

}  // namespace granary

#endif  // GRANARY_COMMON_SCHEDULING_KUBERNETES_NAMES_H_
