// DataFileChunkStore: rebuilding the bookkeeping from the index and the data
// files at open, and repairing what a crash left (data_file_chunk_store.h).
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <set>

#include "absl/strings/str_cat.h"
#include "cache_server/store/data_file_chunk_store.h"
#include "cache_server/store/held_blocks.h"
#include "common/base/logging.h"
#include "common/base/size.h"
#include "common/base/status.h"
#include "common/dataset/block_checksums.h"
#include "common/dataset/chunk_math.h"

namespace granary::store {
namespace {

// Frees the blocks of `file` below `end` that hold no indexed bytes (of a
// whole chunk, or the blocks held of a chunk held in part): bytes of writes a
// crash cut off before their entries were put, which would otherwise take
// disk space the capacity does not count.
absl::Status PunchUnindexedRanges(
    const DataFile& file, const std::vector<std::pair<std::string, v1::ChunkLocation>>& chunks,
    uint64_t end) {
  std::vector<HeldExtent> extents;  // In the data file.
  for (const auto& [key, location] : chunks) {
    for (const HeldExtent& extent : HeldExtents(location)) {
      extents.push_back({location.offset() + extent.begin, location.offset() + extent.end});
    }
  }
  std::sort(extents.begin(), extents.end(),
            [](const HeldExtent& a, const HeldExtent& b) { return a.begin < b.begin; });
  GRANARY_ASSIGN_OR_RETURN(SharedFd fd, file.Descriptor());
  uint64_t covered = 0;  // Block-aligned end of the extents so far.
  auto punch = [&](uint64_t until) -> absl::Status {
    const uint64_t hole_end = until / kBlockBytes * kBlockBytes;
    if (hole_end <= covered) return absl::OkStatus();
    if (::fallocate(fd->get(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                    static_cast<off_t>(covered), static_cast<off_t>(hole_end - covered)) != 0) {
      return ErrnoStatus(errno, absl::StrCat("punch a hole in ", file.path()));
    }
    return absl::OkStatus();
  };
  for (const HeldExtent& extent : extents) {
    GRANARY_RETURN_IF_ERROR(punch(extent.begin));
    covered = std::max(covered, RoundUpToBlock(extent.end));
  }
  return punch(RoundUpToBlock(end));
}

}  // namespace

absl::Status DataFileChunkStore::Recover() {
  MutexLock lock(&mu_);
  GRANARY_ASSIGN_OR_RETURN(version_states_, index_->VersionStates());
  GRANARY_ASSIGN_OR_RETURN(std::set<uint64_t> synced, index_->SyncedFiles());

  // Data files on disk, by id; segment files of the layout before them go.
  std::map<uint64_t, uint32_t> on_disk;
  for (uint32_t d = 0; d < options_.directories.size(); ++d) {
    const std::string& directory = options_.directories[d];
    std::error_code error;
    for (const auto& entry : std::filesystem::directory_iterator(directory, error)) {
      const std::string name = entry.path().filename().string();
      if (name.starts_with("segment-") && name.ends_with(".dat")) {
        std::filesystem::remove(entry.path(), error);
      }
    }
    for (int sub = 0; !error && sub < DataFile::kSubdirectories; ++sub) {
      const std::string folder = absl::StrCat(directory, "/", DataFile::SubdirectoryName(sub));
      for (const auto& entry : std::filesystem::directory_iterator(folder, error)) {
        if (auto id = DataFile::ParseFileName(entry.path().filename().string())) {
          on_disk[*id] = d;
          next_file_id_ = std::max(next_file_id_, *id + 1);
        }
      }
    }
    if (error) {
      return ErrnoStatus(error.value(), absl::StrCat("cannot list cache directory ", directory));
    }
  }

  // Index entries, grouped by data file; entries into missing files are stale.
  std::map<uint64_t, std::vector<std::pair<std::string, v1::ChunkLocation>>> chunks;
  std::vector<std::pair<std::string, uint64_t>> stale;
  GRANARY_RETURN_IF_ERROR(
      index_->ForEach([&](std::string_view key, const v1::ChunkLocation& location) {
        auto file = on_disk.find(location.data_file_id());
        if (file == on_disk.end() || file->second != location.directory() ||
            !ChunkKey::Decode(key).ok()) {
          stale.emplace_back(std::string(key), location.data_file_id());
        } else {
          chunks[location.data_file_id()].emplace_back(std::string(key), location);
        }
      }));
  for (const auto& [key, file_id] : stale) GRANARY_RETURN_IF_ERROR(index_->Delete(key, file_id));

  uint64_t verified = 0;
  uint64_t dropped = 0;
  std::string scratch;  // Where chunks of unsynced files are read to be verified.
  for (const auto& [id, directory] : on_disk) {
    const bool aligned = std::ranges::all_of(
        chunks[id], [](const auto& chunk) { return chunk.second.offset() % kBlockBytes == 0; });
    GRANARY_ASSIGN_OR_RETURN(std::shared_ptr<DataFile> data_file,
                             DataFile::Open(options_.directories[directory], id,
                                            options_.direct_io && aligned, &descriptors_));
    const bool was_synced = synced.contains(id);
    CachedFile file;
    file.file = data_file;
    file.directory = directory;
    file.synced = was_synced;
    uint64_t end = 0;
    std::vector<std::pair<std::string, v1::ChunkLocation>> kept;
    for (const auto& [key, location] : chunks[id]) {
      if (!WellFormed(location)) {
        dropped++;
        GRANARY_RETURN_IF_ERROR(index_->Delete(key, id));
        continue;
      }
      if (!was_synced) {
        verified++;
        if (absl::Status checked = VerifyChunk(*data_file, location, scratch); !checked.ok()) {
          if (checked.code() == absl::StatusCode::kDataLoss) checksum_failures_++;
          dropped++;
          GRANARY_RETURN_IF_ERROR(index_->Delete(key, id));
          continue;
        }
      }
      const ChunkKey chunk = *ChunkKey::Decode(key);
      file.source = {chunk.dataset_version, chunk.file_id};
      // Past the last held byte, the file is cut off.
      const uint64_t held_end = HeldExtents(location).back().end;
      const uint64_t stored = data_file->direct_io() ? RoundUpToBlock(held_end) : held_end;
      end = std::max(end, location.offset() + stored);
      file.disk_bytes += HeldDiskBytes(location);
      file.live_bytes += HeldBytes(location);
      file.live_chunks++;
      if (IsPartial(location)) file.partial_chunks++;
      file.last_use_ms = std::max(file.last_use_ms, location.last_use_unix_ms());
      kept.emplace_back(key, location);
    }
    // A second data file of one source file (only a damaged index can say
    // so) is dropped like an unreferenced one.
    if (file.live_chunks == 0 || files_by_source_.contains(file.source)) {
      GRANARY_RETURN_IF_ERROR(index_->DeleteFile(id));
      GRANARY_RETURN_IF_ERROR(data_file->Unlink());
      continue;
    }
    GRANARY_ASSIGN_OR_RETURN(struct stat st, data_file->Stat());
    if (static_cast<uint64_t>(st.st_size) > end) GRANARY_RETURN_IF_ERROR(data_file->Truncate(end));
    GRANARY_RETURN_IF_ERROR(PunchUnindexedRanges(*data_file, kept, end));
    // Verified whole just now when it was not synced; otherwise at its first
    // OpenWholeFile.
    if (!was_synced) {
      GRANARY_ASSIGN_OR_RETURN(struct stat repaired, data_file->Stat());
      file.verified_generation = file.generation;
      file.verified_ctime = repaired.st_ctim;
    }
    disk_bytes_ += file.disk_bytes;
    directory_bytes_[directory] += file.disk_bytes;
    used_bytes_ += file.live_bytes;
    chunk_count_ += file.live_chunks;
    partial_chunks_ += file.partial_chunks;
    version_bytes_[file.source.first] += file.live_bytes;
    files_by_source_[file.source] = id;
    CachedFile& added = files_.emplace(id, std::move(file)).first->second;
    MaybeSyncLocked(added);
  }
  for (uint64_t id : synced) {
    if (!files_.contains(id)) GRANARY_RETURN_IF_ERROR(index_->DeleteFile(id));
  }

  if (disk_bytes_ > options_.capacity_bytes) {
    for (uint64_t id : OverflowOrder(UsageLocked(/*only_idle=*/false))) {
      if (disk_bytes_ <= options_.capacity_bytes) break;
      evicted_chunks_ += files_.at(id).live_chunks;
      GRANARY_RETURN_IF_ERROR(ReclaimLocked(id));
    }
  }
  GRANARY_LOG(INFO) << "chunk store: " << chunk_count_ << " chunks, " << FormatSize(disk_bytes_)
                    << " of " << FormatSize(options_.capacity_bytes) << " in " << files_.size()
                    << " data files; verified " << verified << " unsynced chunks, dropped "
                    << dropped << "; io engine " << io_->name();
  return absl::OkStatus();
}

}  // namespace granary::store
