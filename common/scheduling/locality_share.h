// The locality of a dataset at a holder (DESIGN.md, "Words"): the share of
// the dataset's bytes the holder keeps. A node keeps at most one copy of each
// chunk; a cache group keeps `replicas` copies (each chunk has that many
// owners in the group), so a group is complete only at replicas × the
// dataset's bytes. granaryd's Locate answer, `granary locate`, the Slurm hook
// (which reads that answer) and the Kubernetes extender all take their shares
// from this one function, so every scheduler scores a cache alike.
//
// Thread-safety: a pure function.
#ifndef GRANARY_COMMON_SCHEDULING_LOCALITY_SHARE_H_
#define GRANARY_COMMON_SCHEDULING_LOCALITY_SHARE_H_

#include <cstdint>

namespace granary {

// held_bytes / (copies × dataset_bytes), clamped to 0..1; a copies of 0 counts
// as 1 (a record from before replicas were kept). A dataset of no bytes is
// complete everywhere: 1.
double LocalityShare(uint64_t held_bytes, uint64_t dataset_bytes, uint32_t copies);

}  // namespace granary

#endif  // GRANARY_COMMON_SCHEDULING_LOCALITY_SHARE_H_
