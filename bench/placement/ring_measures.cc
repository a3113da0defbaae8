#include "bench/placement/ring_measures.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "absl/container/flat_hash_map.h"

namespace granary {
namespace {

constexpr long double kHashSpace = 18446744073709551616.0L;  // 2^64

}  // namespace

double TotalWeight(const std::vector<PlacementNode>& nodes) {
  double total = 0;
  for (const PlacementNode& node : nodes) total += node.weight;
  return total;
}

// An arc runs from the previous end (exclusive) to its own; unsigned
// subtraction wraps the first arc round.
std::vector<long double> OwnedFractions(const PlacementRing& ring) {
  std::vector<long double> owned(ring.nodes().size(), 0);
  auto arcs = ring.Arcs();
  for (size_t i = 0; i < arcs.size(); ++i) {
    uint64_t start = arcs[i == 0 ? arcs.size() - 1 : i - 1].end;
    owned[arcs[i].node] += static_cast<long double>(arcs[i].end - start) / kHashSpace;
  }
  return owned;
}

// Walks the union of both rings' arc ends: every piece between two ends has
// one owner in each ring (the arc whose end is at or after it).
long double MovedFraction(const PlacementRing& before, const PlacementRing& after) {
  absl::flat_hash_map<std::string, uint32_t> index_after;
  for (uint32_t n = 0; n < after.nodes().size(); ++n) index_after[after.nodes()[n].id] = n;
  std::vector<int64_t> same_member(before.nodes().size(), -1);
  for (uint32_t n = 0; n < before.nodes().size(); ++n) {
    auto found = index_after.find(before.nodes()[n].id);
    if (found != index_after.end()) same_member[n] = found->second;
  }
  auto arcs_before = before.Arcs();
  auto arcs_after = after.Arcs();
  auto moved_between = [&](size_t b, size_t a) {
    return same_member[arcs_before[b % arcs_before.size()].node] !=
           arcs_after[a % arcs_after.size()].node;
  };
  long double moved = 0;
  uint64_t previous = 0;
  size_t b = 0, a = 0;
  while (b < arcs_before.size() || a < arcs_after.size()) {
    uint64_t next = std::min(b < arcs_before.size() ? arcs_before[b].end : UINT64_MAX,
                             a < arcs_after.size() ? arcs_after[a].end : UINT64_MAX);
    if (moved_between(b, a)) moved += static_cast<long double>(next - previous);
    previous = next;
    if (b < arcs_before.size() && arcs_before[b].end == next) ++b;
    if (a < arcs_after.size() && arcs_after[a].end == next) ++a;
  }
  // Past the last end of both, keys wrap to each ring's first arc.
  if (moved_between(0, 0)) moved += static_cast<long double>(UINT64_MAX - previous) + 1;
  return moved / kHashSpace;
}

}  // namespace granary
