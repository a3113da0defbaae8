// DataFileChunkStore: storing chunks, through the page cache or with O_DIRECT
// (data_file_chunk_store.h).
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "cache_server/store/data_file_chunk_store.h"
#include "cache_server/store/held_blocks.h"
#include "common/base/logging.h"
#include "common/base/size.h"
#include "common/base/status.h"
#include "common/base/wall_clock.h"
#include "common/dataset/block_checksums.h"
#include "common/dataset/chunk_math.h"
#include "common/dataset/hash.h"

namespace granary::store {

absl::Status DataFileChunkStore::WriteAligned(int fd, uint64_t offset, std::string_view data,
                                              uint64_t disk_bytes) {
  std::unique_ptr<AlignedBuffer> buffer = buffers_.Take(disk_bytes);
  std::memcpy(buffer->data(), data.data(), data.size());
  std::memset(buffer->data() + data.size(), 0, disk_bytes - data.size());
  absl::Status written = io_->Write(fd, /*direct=*/true, offset, {buffer->data(), disk_bytes});
  buffers_.Give(std::move(buffer));
  return written;
}

absl::StatusOr<uint64_t> DataFileChunkStore::WriteBlocksDirect(const DataFile& file,
                                                               uint64_t offset,
                                                               std::string_view data) {
  const uint64_t blocks_bytes = data.size() / kBlockBytes * kBlockBytes;
  if (!options_.direct_writes || options_.direct_io || offset % kBlockBytes != 0 ||
      blocks_bytes < options_.direct_write_min_bytes) {
    return 0;
  }
  absl::StatusOr<UniqueFd> direct = file.OpenForDirectWrites();
  if (absl::IsInvalidArgument(direct.status())) {
    GRANARY_LOG_FIRST_N(WARNING, 1)
        << "chunk store: " << direct.status() << "; writing chunks through the page cache";
    return 0;
  }
  if (!direct.ok()) return direct.status();
  GRANARY_RETURN_IF_ERROR(
      WriteAligned(direct->get(), offset, data.substr(0, blocks_bytes), blocks_bytes));
  return blocks_bytes;
}

absl::Status DataFileChunkStore::WriteChunk(DataFile& file, uint64_t offset, std::string_view data,
                                            std::optional<struct timespec>* ctime_after) {
  GRANARY_ASSIGN_OR_RETURN(SharedFd fd, file.Descriptor());
  absl::Status written;
  if (!file.direct_io()) {
    absl::StatusOr<uint64_t> direct_bytes = WriteBlocksDirect(file, offset, data);
    written = direct_bytes.status();
    if (written.ok() && *direct_bytes < data.size()) {
      const std::string_view rest = data.substr(*direct_bytes);
      written = io_->Write(fd->get(), /*direct=*/false, offset + *direct_bytes,
                           {rest.data(), rest.size()});
    }
  } else {
    written = WriteAligned(fd->get(), offset, data, RoundUpToBlock(data.size()));
  }
  struct stat st;
  if (written.ok() && ::fstat(fd->get(), &st) == 0) *ctime_after = st.st_ctim;
  return written;
}

absl::StatusOr<bool> DataFileChunkStore::Insert(const ChunkKey& key, uint32_t chunk_size,
                                                std::string_view data) {
  if (data.size() > options_.max_chunk_bytes || data.size() > chunk_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunk ", key.ToString(), " is ", FormatSize(data.size()),
                     data.size() > options_.max_chunk_bytes ? ", over the maximum chunk size of "
                                                            : ", over its dataset's chunk size of ",
                     FormatSize(std::min<uint64_t>(options_.max_chunk_bytes, chunk_size))));
  }
  return Store(key, chunk_size, static_cast<uint32_t>(data.size()), 0, data);
}

absl::StatusOr<bool> DataFileChunkStore::InsertBlocks(const ChunkKey& key, uint32_t chunk_size,
                                                      uint32_t chunk_length, uint64_t offset,
                                                      std::string_view data) {
  const uint64_t block_bytes = partial_block_bytes(chunk_size);
  const uint64_t end = offset + data.size();
  if (chunk_length > options_.max_chunk_bytes || chunk_length > chunk_size || data.empty() ||
      end > chunk_length || offset % block_bytes != 0 ||
      (end % block_bytes != 0 && end != chunk_length)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bytes [", offset, ", ", end, ") of chunk ", key.ToString(), " (", chunk_length,
        " bytes, in chunks of ", chunk_size, ") are not whole blocks of ", block_bytes,
        " bytes of a chunk the store takes"));
  }
  return Store(key, chunk_size, chunk_length, offset, data);
}

uint64_t DataFileChunkStore::partial_block_bytes(uint32_t chunk_size) const {
  return PartialBlockBytes(options_.partial_block_bytes, chunk_size);
}

void DataFileChunkStore::CountPutLocked(CachedFile& file,
                                        const std::optional<v1::ChunkLocation>& replaced,
                                        const v1::ChunkLocation& location) {
  const uint64_t added = HeldBytes(location) - (replaced ? HeldBytes(*replaced) : 0);
  file.live_bytes += added;
  version_bytes_[location.dataset_version()] += added;
  used_bytes_ += added;
  if (!replaced) {
    file.live_chunks++;
    chunk_count_++;
  }
  const bool was_partial = replaced && IsPartial(*replaced);
  if (IsPartial(location) && !was_partial) {
    file.partial_chunks++;
    partial_chunks_++;
  } else if (!IsPartial(location) && was_partial) {
    file.partial_chunks--;
    partial_chunks_--;
  }
}

absl::StatusOr<bool> DataFileChunkStore::Store(const ChunkKey& key, uint32_t chunk_size,
                                               uint32_t chunk_length, uint64_t offset,
                                               std::string_view data) {
  const bool whole = offset == 0 && data.size() == chunk_length;
  const uint64_t block_bytes =
      whole ? options_.checksum_block_bytes : partial_block_bytes(chunk_size);
  const std::string encoded = key.Encode();
  // The entry as this insert leaves it, before the index's own is merged in.
  v1::ChunkLocation location;
  if (whole) {
    location.set_length(chunk_length);
    location.set_xxh3(Xxh3(data));
    SetBlockChecksums(data, block_bytes, location);
  } else {
    location = EmptyPartialEntry(chunk_length, block_bytes);
    AddHeldBlocks(offset / block_bytes, data, location);
  }
  const uint64_t chunk_offset = uint64_t{key.chunk_index} * chunk_size;
  const SourceFile source{key.dataset_version, key.file_id};
  Placement placement;
  {
    MutexLock lock(&mu_);
    std::optional<v1::ChunkLocation> existing;
    for (;;) {
      while (inserting_.contains(encoded)) insert_done_.Wait(&mu_);
      GRANARY_ASSIGN_OR_RETURN(existing, index_->Get(encoded));
      if (existing &&
          (!IsPartial(*existing) || (!whole && HoldsRange(*existing, offset, data.size())))) {
        return true;
      }
      absl::StatusOr<bool> has_data_file = HasDataFileLocked(source, chunk_size);
      if (!has_data_file.ok()) {
        insert_errors_++;  // The data file could not be made: the disk is full, say.
        return has_data_file.status();
      }
      if (*has_data_file) break;
    }
    // A block size changed between runs, or a damaged entry: the blocks
    // held cannot be added to.
    if (existing && !whole &&
        (existing->checksum_block_bytes() != block_bytes || !WellFormed(*existing))) {
      return false;
    }
    // Blocks held already take no more disk.
    const uint64_t held_disk_bytes = existing ? HeldDiskBytes(*existing) : 0;
    v1::ChunkLocation after = location;
    if (existing && !whole) {
      after = *existing;
      MergeHeldBlocks(location, after);
    }
    const uint64_t disk_bytes = HeldDiskBytes(after);
    absl::StatusOr<std::optional<Placement>> reserved =
        ReserveLocked(source, chunk_size, chunk_offset,
                      disk_bytes > held_disk_bytes ? disk_bytes - held_disk_bytes : 0, whole);
    if (!reserved.ok()) {
      insert_errors_++;  // A new data file could not be made: the disk is full, say.
      return reserved.status();
    }
    if (!*reserved) {
      admissions_refused_++;
      return false;
    }
    placement = **std::move(reserved);
    inserting_.insert(encoded);
  }

  // Without the ctime the file is read back before it is handed out whole.
  std::optional<struct timespec> written_ctime;
  absl::Status status =
      WriteChunk(*placement.file, placement.offset + offset, data, &written_ctime);

  location.set_directory(placement.directory);
  location.set_data_file_id(placement.file->id());
  location.set_offset(placement.offset);
  location.set_dataset_version(key.dataset_version);
  location.set_last_use_unix_ms(NowUnixMs());
  {
    MutexLock lock(&mu_);
    inserting_.erase(encoded);
    insert_done_.SignalAll();
    CachedFile& file = files_.at(placement.file->id());
    file.pending_writes--;
    // What the index holds now: the entry read before the write may have
    // been dropped meanwhile (a block that did not verify), and its blocks
    // must not come back with this insert's.
    std::optional<v1::ChunkLocation> replaced;
    if (status.ok()) {
      absl::StatusOr<std::optional<v1::ChunkLocation>> current = index_->Get(encoded);
      status = current.status();
      if (status.ok()) replaced = *std::move(current);
    }
    if (status.ok() && replaced && !whole && IsPartial(*replaced) &&
        replaced->checksum_block_bytes() == block_bytes && WellFormed(*replaced)) {
      v1::ChunkLocation merged = *replaced;
      MergeHeldBlocks(location, merged);
      merged.set_last_use_unix_ms(location.last_use_unix_ms());
      location = std::move(merged);
    }
    if (status.ok()) status = index_->Put(encoded, location, placement.unmark_synced);
    if (status.ok()) {
      if (options_.events) options_.events->Kept(key, offset, data.size());
      CountPutLocked(file, replaced, location);
      file.last_use_ms = location.last_use_unix_ms();
      inserts_++;
      if (file.written_here && written_ctime && file.pending_writes == 0 &&
          file.generation == placement.generation) {
        file.verified_generation = placement.generation;
        file.verified_ctime = *written_ctime;
        file.verified_in_place = false;
      }
    }
    MaybeSyncLocked(file);
    // A file whose writes all failed (a full disk) holds nothing: it and the
    // capacity it reserved go now, or they would pile up, one per failed
    // insert, until no chunk could be admitted.
    if (!status.ok()) {
      if (whole) file.unindexed_offsets.insert(placement.offset);
      ReclaimIfDeadLocked(file);
    }
  }
  if (!status.ok()) {
    insert_errors_++;
    return absl::Status(status.code(),
                        absl::StrCat("storing chunk ", key.ToString(), ": ", status.message()));
  }
  return true;
}

}  // namespace granary::store
