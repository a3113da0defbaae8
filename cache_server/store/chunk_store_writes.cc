// DataFileChunkStore: storing chunks, through the page cache or with O_DIRECT
// (data_file_chunk_store.h).
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "cache_server/store/data_file_chunk_store.h"
#include "common/block_checksums.h"
#include "common/chunk_math.h"
#include "common/hash.h"
#include "common/logging.h"
#include "common/size.h"
#include "common/status.h"
#include "common/wall_clock.h"

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
  const std::string encoded = key.Encode();
  v1::ChunkLocation location;
  location.set_xxh3(Xxh3(data));
  SetBlockChecksums(data, options_.checksum_block_bytes, location);
  const uint64_t stored_bytes = RoundUpToBlock(data.size());
  const uint64_t offset = uint64_t{key.chunk_index} * chunk_size;
  const SourceFile source{key.dataset_version, key.file_id};
  Placement placement;
  {
    MutexLock lock(&mu_);
    for (;;) {
      while (inserting_.contains(encoded)) insert_done_.Wait(&mu_);
      GRANARY_ASSIGN_OR_RETURN(std::optional<v1::ChunkLocation> existing, index_->Get(encoded));
      if (existing) return true;
      absl::StatusOr<bool> has_data_file = HasDataFileLocked(source, chunk_size);
      if (!has_data_file.ok()) {
        insert_errors_++;  // The data file could not be made: the disk is full, say.
        return has_data_file.status();
      }
      if (*has_data_file) break;
    }
    absl::StatusOr<std::optional<Placement>> reserved =
        ReserveLocked(source, chunk_size, offset, stored_bytes);
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
  absl::Status status = WriteChunk(*placement.file, placement.offset, data, &written_ctime);

  location.set_directory(placement.directory);
  location.set_data_file_id(placement.file->id());
  location.set_offset(placement.offset);
  location.set_length(static_cast<uint32_t>(data.size()));
  location.set_dataset_version(key.dataset_version);
  location.set_last_use_unix_ms(NowUnixMs());
  {
    MutexLock lock(&mu_);
    inserting_.erase(encoded);
    insert_done_.SignalAll();
    CachedFile& file = files_.at(placement.file->id());
    file.pending_writes--;
    if (status.ok()) status = index_->Put(encoded, location, placement.unmark_synced);
    if (status.ok()) {
      file.live_bytes += data.size();
      file.live_chunks++;
      file.last_use_ms = location.last_use_unix_ms();
      version_bytes_[key.dataset_version] += data.size();
      used_bytes_ += data.size();
      chunk_count_++;
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
      file.unindexed_offsets.insert(placement.offset);
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
