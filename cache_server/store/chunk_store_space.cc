// DataFileChunkStore: where chunks go and what leaves to make room -- data
// files, capacity, eviction, withdrawals and syncing (data_file_chunk_store.h).

#include <algorithm>

#include "cache_server/store/data_file_chunk_store.h"
#include "cache_server/store/held_blocks.h"
#include "common/base/logging.h"
#include "common/base/status.h"
#include "common/base/wall_clock.h"
#include "common/dataset/block_checksums.h"
#include "common/dataset/chunk_math.h"

namespace granary::store {

VersionState DataFileChunkStore::StateLocked(uint64_t dataset_version) const {
  auto it = version_states_.find(dataset_version);
  return it == version_states_.end() ? VersionState::kInactive : it->second;
}

std::vector<FileUsage> DataFileChunkStore::UsageLocked(bool only_idle) const {
  std::vector<FileUsage> usage;
  usage.reserve(files_.size());
  for (const auto& [id, file] : files_) {
    if (only_idle && file.pending_writes > 0) continue;
    usage.push_back({.id = id,
                     .file_bytes = file.disk_bytes,
                     .last_use_ms = file.last_use_ms,
                     .state = StateLocked(file.source.first)});
  }
  return usage;
}

void DataFileChunkStore::ForgetVersionBytesLocked(uint64_t dataset_version, uint64_t bytes) {
  if (auto it = version_bytes_.find(dataset_version); it != version_bytes_.end()) {
    it->second -= bytes;
    if (it->second == 0) version_bytes_.erase(it);
  }
}

absl::StatusOr<bool> DataFileChunkStore::MakeRoomLocked(uint64_t bytes) {
  if (disk_bytes_ + bytes <= options_.capacity_bytes) return true;
  const uint64_t free_bytes = options_.capacity_bytes - disk_bytes_;
  std::vector<FileUsage> idle = UsageLocked(/*only_idle=*/true);
  auto victims = ChooseVictims(options_.eviction, bytes + eviction_slack_bytes_, free_bytes, idle);
  if (!victims) victims = ChooseVictims(options_.eviction, bytes, free_bytes, std::move(idle));
  if (!victims) return false;
  for (uint64_t id : *victims) {
    evicted_chunks_ += files_.at(id).live_chunks;
    GRANARY_RETURN_IF_ERROR(ReclaimLocked(id));
  }
  return true;
}

absl::StatusOr<std::optional<DataFileChunkStore::Placement>> DataFileChunkStore::ReserveLocked(
    const SourceFile& source, uint32_t chunk_size, uint64_t offset, uint64_t bytes, bool whole) {
  auto existing = files_by_source_.find(source);
  // Blocks of a chunk dropped there stay counted until a whole chunk is
  // written there again; blocks of one held in part come out of them.
  const bool counted = existing != files_by_source_.end() &&
                       (whole ? files_.at(existing->second).unindexed_offsets.erase(offset) > 0
                              : files_.at(existing->second).unindexed_offsets.contains(offset));
  if (!counted) {
    GRANARY_ASSIGN_OR_RETURN(bool room, MakeRoomLocked(bytes));
    if (!room) return std::nullopt;
  }
  GRANARY_ASSIGN_OR_RETURN(CachedFile * file, DataFileOfLocked(source, chunk_size));
  Placement placement{.file = file->file,
                      .directory = file->directory,
                      .offset = offset,
                      .unmark_synced = file->synced,
                      .generation = ++file->generation};
  file->synced = false;
  file->pending_writes++;
  if (!counted) {
    file->disk_bytes += bytes;
    disk_bytes_ += bytes;
    directory_bytes_[file->directory] += bytes;
  }
  return placement;
}

absl::StatusOr<DataFileChunkStore::CachedFile*> DataFileChunkStore::DataFileOfLocked(
    const SourceFile& source, uint32_t chunk_size) {
  if (auto it = files_by_source_.find(source); it != files_by_source_.end()) {
    return &files_.at(it->second);
  }
  const NewDataFile created = NewDataFileLocked(chunk_size);
  GRANARY_ASSIGN_OR_RETURN(std::unique_ptr<DataFile> data_file, CreateDataFile(created));
  return &AddDataFileLocked(source, created.directory, std::move(data_file));
}

absl::StatusOr<bool> DataFileChunkStore::HasDataFileLocked(const SourceFile& source,
                                                           uint32_t chunk_size) {
  if (files_by_source_.contains(source)) return true;
  if (creating_.contains(source)) {
    insert_done_.Wait(&mu_);
    return false;
  }
  const NewDataFile created = NewDataFileLocked(chunk_size);
  creating_.insert(source);
  mu_.Unlock();
  absl::StatusOr<std::unique_ptr<DataFile>> data_file = CreateDataFile(created);
  mu_.Lock();
  creating_.erase(source);
  insert_done_.SignalAll();
  if (!data_file.ok()) return data_file.status();
  AddDataFileLocked(source, created.directory, *std::move(data_file));
  return false;
}

DataFileChunkStore::NewDataFile DataFileChunkStore::NewDataFileLocked(uint32_t chunk_size) {
  return NewDataFile{.directory = static_cast<uint32_t>(
                         std::min_element(directory_bytes_.begin(), directory_bytes_.end()) -
                         directory_bytes_.begin()),
                     .id = next_file_id_++,
                     .direct_io = options_.direct_io && chunk_size % kBlockBytes == 0};
}

absl::StatusOr<std::unique_ptr<DataFile>> DataFileChunkStore::CreateDataFile(
    const NewDataFile& file) {
  return DataFile::Create(options_.directories[file.directory], file.id, file.direct_io,
                          &descriptors_);
}

DataFileChunkStore::CachedFile& DataFileChunkStore::AddDataFileLocked(
    const SourceFile& source, uint32_t directory, std::unique_ptr<DataFile> data_file) {
  const uint64_t id = data_file->id();
  CachedFile& file = files_[id];
  file.file = std::move(data_file);
  file.directory = directory;
  file.source = source;
  file.written_here = true;
  file.last_use_ms = NowUnixMs();
  files_by_source_[source] = id;
  return file;
}

absl::Status DataFileChunkStore::ReclaimLocked(uint64_t file_id) {
  CachedFile& file = files_.at(file_id);
  // Entries go first: a crash in between leaves an unreferenced file, which
  // the next open deletes, never an entry pointing into a missing file.
  GRANARY_RETURN_IF_ERROR(index_->DeleteFile(file_id));
  GRANARY_RETURN_IF_ERROR(file.file->Unlink());
  disk_bytes_ -= file.disk_bytes;
  directory_bytes_[file.directory] -= file.disk_bytes;
  used_bytes_ -= file.live_bytes;
  chunk_count_ -= file.live_chunks;
  partial_chunks_ -= file.partial_chunks;
  ForgetVersionBytesLocked(file.source.first, file.live_bytes);
  WithdrawLocked(file.source);
  files_by_source_.erase(file.source);
  files_.erase(file_id);
  return absl::OkStatus();
}

void DataFileChunkStore::WithdrawLocked(const SourceFile& source) {
  constexpr size_t kRememberedWithdrawals = 4096;
  if (options_.events) options_.events->Withdrawn(source.first, source.second);
  withdrawn_.push_back(source);
  if (withdrawn_.size() > kRememberedWithdrawals) {
    withdrawn_.pop_front();
    withdrawn_first_++;
  }
}

void DataFileChunkStore::DropLocked(std::string_view key, const v1::ChunkLocation& location) {
  auto current = index_->Get(key);
  if (!current.ok() || !current->has_value() ||
      (*current)->data_file_id() != location.data_file_id() ||
      (*current)->offset() != location.offset()) {
    return;  // Already dropped, or replaced by a new copy.
  }
  if (absl::Status deleted = index_->Delete(key, location.data_file_id()); !deleted.ok()) {
    GRANARY_LOG(ERROR) << "chunk store: " << deleted.message();
    return;
  }
  auto it = files_.find(location.data_file_id());
  if (it == files_.end()) return;
  CachedFile& file = it->second;
  // What the index held, which blocks added since the caller's lookup may
  // have grown.
  const v1::ChunkLocation& dropped = **current;
  const uint64_t held_bytes = HeldBytes(dropped);
  file.written_here = false;  // Its chunks are read back from now on.
  file.live_bytes -= held_bytes;
  file.live_chunks--;
  used_bytes_ -= held_bytes;
  chunk_count_--;
  if (IsPartial(dropped)) {
    file.partial_chunks--;
    partial_chunks_--;
  }
  ForgetVersionBytesLocked(file.source.first, held_bytes);
  if (file.live_chunks > 0 || file.pending_writes > 0) {
    WithdrawLocked(file.source);  // No longer whole; reclaiming withdraws it too.
    // The blocks of a whole chunk stay counted, so one written there again
    // takes no more; those of a chunk held in part stay counted until the
    // file goes.
    if (!IsPartial(dropped)) file.unindexed_offsets.insert(location.offset());
  }
  ReclaimIfDeadLocked(file);
}

void DataFileChunkStore::ReclaimIfDeadLocked(const CachedFile& file) {
  if (file.live_chunks > 0 || file.pending_writes > 0) return;
  if (absl::Status reclaimed = ReclaimLocked(file.file->id()); !reclaimed.ok()) {
    GRANARY_LOG(ERROR) << "chunk store: " << reclaimed.message();
  }
}

void DataFileChunkStore::MaybeSyncLocked(CachedFile& file) {
  if (file.synced || file.pending_writes > 0 || file.live_chunks == 0 ||
      file.queued_generation == file.generation) {
    return;
  }
  file.queued_generation = file.generation;
  syncer_.Sync(file.file, file.generation);
}

absl::Status DataFileChunkStore::MarkSyncedLocked(
    const std::vector<DataFileSyncer::SyncedFile>& synced) {
  std::vector<CachedFile*> marked;
  std::vector<uint64_t> file_ids;
  for (const DataFileSyncer::SyncedFile& file : synced) {
    auto it = files_.find(file.id);
    // Reclaimed, or written again since: a later sync will mark it.
    if (it == files_.end() || it->second.generation != file.generation ||
        it->second.pending_writes > 0) {
      continue;
    }
    marked.push_back(&it->second);
    file_ids.push_back(file.id);
  }
  if (file_ids.empty()) return absl::OkStatus();
  GRANARY_RETURN_IF_ERROR(index_->MarkSynced(file_ids));
  for (CachedFile* file : marked) file->synced = true;
  return absl::OkStatus();
}

}  // namespace granary::store
