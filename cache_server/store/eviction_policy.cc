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
      return state != VersionState::kPinned && state != VersionState::kHeld;
  }
  return false;
}

// Where a file of a version in `state` comes in OverflowOrder().
int OverflowRank(VersionState state) {
  switch (state) {
    case VersionState::kInactive:
      return 0;
    case VersionState::kActive:
      return 1;
    case VersionState::kHeld:
      return 2;
    case VersionState::kPinned:
      return 3;
  }
  return 3;
}

}  // namespace

std::optional<std::vector<uint64_t>> ChooseVictims(EvictionMode mode, uint64_t needed_bytes,
                                                   uint64_t free_bytes,
                                                   std::vector<FileUsage> reclaimable) {
  std::erase_if(reclaimable,
                [mode](const FileUsage& file) { return !Reclaimable(mode, file.state); });
  std::sort(reclaimable.begin(), reclaimable.end(), [](const FileUsage& a, const FileUsage& b) {
    return std::tie(a.last_use_ms, a.id) < std::tie(b.last_use_ms, b.id);
  });
  std::vector<uint64_t> victims;
  for (const FileUsage& file : reclaimable) {
    if (free_bytes >= needed_bytes) break;
    victims.push_back(file.id);
    free_bytes += file.file_bytes;
  }
  if (free_bytes < needed_bytes) return std::nullopt;
  return victims;
}

std::vector<uint64_t> OverflowOrder(std::vector<FileUsage> files) {
  std::sort(files.begin(), files.end(), [](const FileUsage& a, const FileUsage& b) {
    return std::tuple(OverflowRank(a.state), a.last_use_ms, a.id) <
           std::tuple(OverflowRank(b.state), b.last_use_ms, b.id);
  });
  std::vector<uint64_t> order;
  order.reserve(files.size());
  for (const FileUsage& file : files) order.push_back(file.id);
  return order;
}

}  // namespace granary::store
