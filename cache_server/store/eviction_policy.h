// The eviction policy decides which whole segments to reclaim so that a new
// chunk fits under the capacity, or that it must not be admitted at all.
//
// Space is reclaimed a whole segment at a time: a segment's chunks all belong
// to one dataset version (the store keeps one open segment per version), so a
// segment has one version state and a last use (its latest read or write),
// and deleting its file frees exactly its bytes with no compaction. Segments
// are small next to the capacity, so this granularity costs little.
//
// kDatasetAware (the CoorDL "MinIO" rule): only segments of inactive versions
// are reclaimed, least recently used first. When that is not enough, the new
// chunk is declined, whatever its version's state: a chunk of an active
// version never displaces another active chunk, so an active dataset larger
// than the cache keeps the part it has (hit rate ≈ capacity / dataset) instead
// of cycling through it (LRU's hit rate ≈ 0 under epoch-style access).
// kLru: every segment but pinned ones, least recently used first.
//
// Thread-safety: pure functions.
#ifndef GRANARY_CACHE_SERVER_STORE_EVICTION_POLICY_H_
#define GRANARY_CACHE_SERVER_STORE_EVICTION_POLICY_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "cache_server/store/chunk_store.h"

namespace granary::store {

struct SegmentUsage {
  uint64_t id = 0;
  uint64_t file_bytes = 0;
  int64_t last_use_ms = 0;
  VersionState state = VersionState::kInactive;
};

// The segments to reclaim, first victim first, so that `needed_bytes` more
// fit when `free_bytes` are free now; nullopt when `mode` declines the chunk.
// `reclaimable` holds the segments no write is in progress on.
std::optional<std::vector<uint64_t>> ChooseVictims(EvictionMode mode, uint64_t needed_bytes,
                                                   uint64_t free_bytes,
                                                   std::vector<SegmentUsage> reclaimable);

// Every segment in the order to reclaim them when the store holds more than
// its capacity (the capacity was lowered between runs): inactive, then
// active, then pinned, least recently used first within each.
std::vector<uint64_t> OverflowOrder(std::vector<SegmentUsage> segments);

}  // namespace granary::store

#endif  // GRANARY_CACHE_SERVER_STORE_EVICTION_POLICY_H_
