// DataFileChunkStore: construction, lookups and the version-wide calls
// (data_file_chunk_store.h).
#include "cache_server/store/data_file_chunk_store.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>

#include "cache_server/store/held_blocks.h"
#include "common/base/logging.h"
#include "common/base/status.h"
#include "common/base/wall_clock.h"

namespace granary::store {
namespace {

size_t OpenDataFileBudget(const StoreOptions& options) {
  if (options.max_open_data_files > 0) return options.max_open_data_files;
  constexpr size_t kWithoutLimit = 4096;  // When the limit cannot be read, or is infinite.
  struct rlimit files;
  if (::getrlimit(RLIMIT_NOFILE, &files) != 0 || files.rlim_cur == RLIM_INFINITY) {
    return kWithoutLimit;
  }
  return std::max<size_t>(files.rlim_cur / 4, 1);
}

}  // namespace

DataFileChunkStore::DataFileChunkStore(const StoreOptions& options,
                                       std::unique_ptr<ChunkIndex> index,
                                       std::unique_ptr<IoEngine> io)
    : options_(options),
      index_(std::move(index)),
      io_(std::move(io)),
      descriptors_(OpenDataFileBudget(options)),
      directory_bytes_(options.directories.size(), 0),
      eviction_slack_bytes_(std::min<uint64_t>(options.capacity_bytes / 32, 64 << 20)),
      withdrawn_first_(
          static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                    std::chrono::system_clock::now().time_since_epoch())
                                    .count()) +
          1),
      syncer_([this](const std::vector<DataFileSyncer::SyncedFile>& synced) {
        // Under the lock like every index mutation: RocksDB would otherwise
        // merge concurrent writes on one thread, which TSan cannot follow
        // in the uninstrumented library.
        MutexLock lock(&mu_);
        return MarkSyncedLocked(synced);
      }) {}

absl::StatusOr<std::optional<DataFileChunkStore::Found>> DataFileChunkStore::Find(
    std::string_view encoded_key) {
  GRANARY_ASSIGN_OR_RETURN(std::optional<v1::ChunkLocation> location, index_->Get(encoded_key));
  if (!location) return std::nullopt;
  MutexLock lock(&mu_);
  auto it = files_.find(location->data_file_id());
  if (it == files_.end()) return std::nullopt;
  it->second.last_use_ms = NowUnixMs();
  return Found{*std::move(location), it->second.file};
}

bool DataFileChunkStore::Contains(const ChunkKey& key) {
  auto location = index_->Get(key.Encode());
  return location.ok() && location->has_value() && !IsPartial(**location);
}

std::vector<HeldExtent> DataFileChunkStore::HeldExtentsOf(const ChunkKey& key) {
  auto location = index_->Get(key.Encode());
  if (!location.ok() || !location->has_value()) return {};
  return HeldExtents(**location);
}

void DataFileChunkStore::SetVersionState(uint64_t dataset_version, VersionState state) {
  MutexLock lock(&mu_);
  if (absl::Status saved = index_->SetVersionState(dataset_version, state); !saved.ok()) {
    GRANARY_LOG(ERROR) << "chunk store: " << saved.message();
  }
  if (state == VersionState::kInactive) {
    version_states_.erase(dataset_version);
  } else {
    version_states_[dataset_version] = state;
  }
}

VersionState DataFileChunkStore::GetVersionState(uint64_t dataset_version) {
  MutexLock lock(&mu_);
  return StateLocked(dataset_version);
}

absl::StatusOr<uint64_t> DataFileChunkStore::RemoveVersion(uint64_t dataset_version) {
  MutexLock lock(&mu_);
  const auto it = version_bytes_.find(dataset_version);
  const uint64_t freed = it == version_bytes_.end() ? 0 : it->second;
  std::vector<uint64_t> file_ids;
  for (const auto& [id, file] : files_) {
    if (file.source.first == dataset_version && file.pending_writes == 0) file_ids.push_back(id);
  }
  for (uint64_t id : file_ids) GRANARY_RETURN_IF_ERROR(ReclaimLocked(id));
  // Files with writes in flight stay; their indexed chunks go.
  GRANARY_ASSIGN_OR_RETURN(auto remaining, index_->ChunksOfVersion(dataset_version));
  for (const auto& [key, location] : remaining) DropLocked(key, location);
  GRANARY_RETURN_IF_ERROR(index_->SetVersionState(dataset_version, VersionState::kInactive));
  version_states_.erase(dataset_version);
  return freed;
}

uint64_t DataFileChunkStore::CachedBytes(uint64_t dataset_version) {
  MutexLock lock(&mu_);
  auto it = version_bytes_.find(dataset_version);
  return it == version_bytes_.end() ? 0 : it->second;
}

std::vector<ChunkKey> DataFileChunkStore::ChunksOf(uint64_t dataset_version) {
  std::vector<ChunkKey> keys;
  auto chunks = index_->ChunksOfVersion(dataset_version);
  if (!chunks.ok()) {
    GRANARY_LOG(ERROR) << "chunk store: " << chunks.status().message();
    return keys;
  }
  for (const auto& [encoded, location] : *chunks) {
    if (auto key = ChunkKey::Decode(encoded); key.ok()) keys.push_back(*key);
  }
  return keys;
}

StoreStats DataFileChunkStore::Stats() {
  StoreStats stats;
  {
    MutexLock lock(&mu_);
    stats.used_bytes = used_bytes_;
    stats.disk_bytes = disk_bytes_;
    stats.chunk_count = chunk_count_;
    stats.partial_chunks = partial_chunks_;
  }
  stats.capacity_bytes = options_.capacity_bytes;
  stats.hits = hits_;
  stats.misses = misses_;
  stats.checksum_failures = checksum_failures_;
  stats.inserts = inserts_;
  stats.admissions_refused = admissions_refused_;
  stats.insert_errors = insert_errors_;
  stats.evicted_chunks = evicted_chunks_;
  stats.read_bytes = read_bytes_;
  stats.whole_files = whole_files_;
  stats.whole_files_ahead = whole_files_ahead_;
  stats.io_engine = std::string(io_->name());
  return stats;
}

}  // namespace granary::store
