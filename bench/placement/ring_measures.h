// Exact measures of a placement ring, computed from its arcs rather than from
// sampled keys: each member's share of the hash space, and the share that
// changes owner between two rings (with the members' total weight, which fair
// shares are counted against). The placement benchmark and the cluster
// simulation both read rings through these.
//
// Thread-safety: pure functions of their arguments.
#ifndef GRANARY_BENCH_PLACEMENT_RING_MEASURES_H_
#define GRANARY_BENCH_PLACEMENT_RING_MEASURES_H_

#include <vector>

#include "common/cluster/placement_ring.h"

namespace granary {

// The sum of the nodes' weights.
double TotalWeight(const std::vector<PlacementNode>& nodes);

// Each member's fraction of the hash space, indexed as ring.nodes().
std::vector<long double> OwnedFractions(const PlacementRing& ring);

// Fraction of the hash space whose owner differs between `before` and
// `after` (members are matched by id).
long double MovedFraction(const PlacementRing& before, const PlacementRing& after);

}  // namespace granary

#endif  // GRANARY_BENCH_PLACEMENT_RING_MEASURES_H_
