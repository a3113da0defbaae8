#include "fuse_client/read_path/local_extents.h"

#include <fcntl.h>

namespace granary::fuse {

absl::StatusOr<std::shared_ptr<const LocalChunkReader::Extent>> LocalExtents::Find(
    LocalChunkReader& local, const ChunkKey& key, uint64_t read_bytes, bool* asked) {
  const auto now = std::chrono::steady_clock::now();
  {
    MutexLock lock(&mutex_);
    auto it = known_.find(key.chunk_index);
    if (it != known_.end() &&
        (it->second.extent != nullptr || now - it->second.asked_at < miss_ttl_)) {
      *asked = false;
      return it->second.extent;
    }
  }
  *asked = true;
  absl::StatusOr<LocalChunkReader::Extent> located = local.Locate(key, read_bytes);
  if (!located.ok() && !absl::IsNotFound(located.status())) return located.status();
  std::shared_ptr<const LocalChunkReader::Extent> extent;
  if (located.ok()) extent = std::make_shared<const LocalChunkReader::Extent>(*std::move(located));
  MutexLock lock(&mutex_);
  known_[key.chunk_index] = Known{extent, now};
  return extent;
}

void LocalExtents::Forget(uint32_t chunk_index) {
  MutexLock lock(&mutex_);
  known_.erase(chunk_index);
}

absl::Status LocalExtents::ReadVerified(LocalChunkReader& local, const ChunkKey& key,
                                        uint32_t offset_in_chunk, std::span<char> out,
                                        bool* asked) {
  absl::StatusOr<std::shared_ptr<const LocalChunkReader::Extent>> extent =
      Find(local, key, out.size(), asked);
  if (!extent.ok()) return extent.status();
  if (*extent == nullptr) {
    return absl::NotFoundError("chunk " + key.ToString() + " is not held by the local granaryd");
  }
  absl::Status read =
      ReadVerifiedRange((*extent)->fd.get(), (*extent)->location, key, offset_in_chunk, out);
  if (absl::IsDataLoss(read)) Forget(key.chunk_index);
  return read;
}

absl::Status LocalExtents::Prefetch(LocalChunkReader& local, const ChunkKey& key) {
  bool asked = false;
  absl::StatusOr<std::shared_ptr<const LocalChunkReader::Extent>> extent =
      Find(local, key, /*read_bytes=*/0, &asked);
  if (!extent.ok()) return extent.status();
  if (*extent == nullptr) {
    return absl::NotFoundError("chunk " + key.ToString() + " is not held by the local granaryd");
  }
  // Advice only: a failure costs the read that follows its disk wait, no more.
  ::posix_fadvise((*extent)->fd.get(), static_cast<off_t>((*extent)->location.offset()),
                  static_cast<off_t>((*extent)->location.length()), POSIX_FADV_WILLNEED);
  return absl::OkStatus();
}

}  // namespace granary::fuse
