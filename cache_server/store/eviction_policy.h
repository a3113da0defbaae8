// The eviction policy decides which whole data files to reclaim so that a new
// chunk fits under the capacity, or that it must not be admitted at all.
//
// Space is reclaimed a whole data file at a time: a data file holds chunks of
// one source file of one dataset version (data_file.h), so it has one version
// state and a last use (its latest read or write), and deleting it frees
// exactly its bytes with no compaction.
//
// kDatasetAware (the CoorDL "MinIO" rule): only files of inactive versions
// are reclaimed, least recently used first. When that is not enough, the new
// chunk is declined, whatever its version's state: a chunk of an active
// version never displaces another active chunk, so an active dataset larger
// than the cache keeps the part it has (hit rate ≈ capacity / dataset) instead
// of cycling through it (LRU's hit rate ≈ 0 under epoch-style access).
// kLru: every file but those of pinned and held versions, least recently
// used first.
//
// Thread-safety: pure functions.
#ifndef GRANARY_CACHE_SERVER_STORE_EVICTION_POLICY_H_
#define GRANARY_CACHE_SERVER_STORE_EVICTION_POLICY_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "cache_server/store/chunk_store.h"

namespace granary::store {

struct FileUsage {
  uint64_t id = 0;
  uint64_t file_bytes = 0;
  int64_t last_use_ms = 0;
  VersionState state = VersionState::kInactive;
};

// The data files to reclaim, first victim first, so that `needed_bytes` more
// fit when `free_bytes` are free now; nullopt when `mode` declines the chunk.
// `reclaimable` holds the files no write is in progress on.
std::optional<std::vector<uint64_t>> ChooseVictims(EvictionMode mode, uint64_t needed_bytes,
                                                   uint64_t free_bytes,
                                                   std::vector<FileUsage> reclaimable);

// Every data file in the order to reclaim them when the store holds more than
// its capacity (the capacity was lowered between runs): inactive, then
// active, then held, then pinned, least recently used first within each.
std::vector<uint64_t> OverflowOrder(std::vector<FileUsage> files);

}  // namespace granary::store

#endif  // GRANARY_CACHE_SERVER_STORE_EVICTION_POLICY_H_
