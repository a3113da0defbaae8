#include "cache_server/prewarm/chunk_walk.h"

#include <algorithm>
#include <string_view>
#include <tuple>

namespace granary {

ChunkWalk::ChunkWalk(std::vector<PlannedChunk> chunks, size_t file_count)
    : chunks_(std::move(chunks)), taken_(chunks_.size(), false), failed_(file_count, false) {}

void ChunkWalk::Prefer(const Manifest& manifest, const ChunkKey& missed) {
  auto after = std::upper_bound(
      chunks_.begin(), chunks_.end(), missed, [](const ChunkKey& key, const PlannedChunk& chunk) {
        return std::tie(key.file_id, key.chunk_index) < std::tie(chunk.file_id, chunk.chunk_index);
      });
  const ManifestEntries& entries = manifest.entries();
  const std::string_view directory =
      missed.file_id < entries.size() ? ParentPath(entries[missed.file_id].path) : "";
  preferred_ = static_cast<size_t>(after - chunks_.begin());
  preferred_end_ = preferred_;
  preferred_left_ = kPreferredChunks;
  while (preferred_end_ < chunks_.size() && preferred_end_ - preferred_ < kPreferredReach &&
         IsBelow(entries[chunks_[preferred_end_].file_id].path, directory)) {
    ++preferred_end_;
  }
}

bool ChunkWalk::HasPreferred() {
  while (preferred_ < preferred_end_ && !Available(preferred_)) ++preferred_;
  return preferred_left_ > 0 && preferred_ < preferred_end_;
}

bool ChunkWalk::Exhausted() {
  while (next_ < chunks_.size() && !Available(next_)) ++next_;
  return next_ == chunks_.size();
}

std::optional<size_t> ChunkWalk::Next(Order order) {
  if (HasPreferred()) {
    taken_[preferred_] = true;
    --preferred_left_;
    return preferred_++;
  }
  if (order == Order::kPreferredOnly) return std::nullopt;
  for (; next_ < chunks_.size(); ++next_) {
    if (!Available(next_)) continue;
    taken_[next_] = true;
    return next_++;
  }
  return std::nullopt;
}

bool ChunkWalk::MarkFailed(uint64_t file_id) {
  if (failed_[file_id]) return false;
  failed_[file_id] = true;
  return true;
}

}  // namespace granary
