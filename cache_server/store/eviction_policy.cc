#include "cache_server/store/eviction_policy.h"

#include <algorithm>
#include <tuple>

namespace granary::store {
namespace {

bool Reclaimable(EvictionMode mode, VersionState state) {
  switch (mode) {
    case EvictionMode::kDatasetAware:
      return state == VersionState::kInactive;
    case EvictionMode::kLru:
      return state != VersionState::kPinned;
  }
  return false;
}

}  // namespace

std::optional<std::vector<uint64_t>> ChooseVictims(EvictionMode mode, uint64_t needed_bytes,
                                                   uint64_t free_bytes,
                                                   std::vector<SegmentUsage> reclaimable) {
  std::erase_if(reclaimable,
                [mode](const SegmentUsage& segment) { return !Reclaimable(mode, segment.state); });
  std::sort(reclaimable.begin(), reclaimable.end(),
            [](const SegmentUsage& a, const SegmentUsage& b) {
              return std::tie(a.last_use_ms, a.id) < std::tie(b.last_use_ms, b.id);
            });
  std::vector<uint64_t> victims;
  for (const SegmentUsage& segment : reclaimable) {
    if (free_bytes >= needed_bytes) break;
    victims.push_back(segment.id);
    free_bytes += segment.file_bytes;
  }
  if (free_bytes < needed_bytes) return std::nullopt;
  return victims;
}

std::vector<uint64_t> OverflowOrder(std::vector<SegmentUsage> segments) {
  std::sort(segments.begin(), segments.end(), [](const SegmentUsage& a, const SegmentUsage& b) {
    return std::tie(a.state, a.last_use_ms, a.id) < std::tie(b.state, b.last_use_ms, b.id);
  });
  std::vector<uint64_t> order;
  order.reserve(segments.size());
  for (const SegmentUsage& segment : segments) order.push_back(segment.id);
  return order;
}

}  // namespace granary::store
