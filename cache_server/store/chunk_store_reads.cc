// DataFileChunkStore: verified reads of chunks and ranges of them, and where
// a chunk lies for a reader that reads it itself (data_file_chunk_store.h).
#include <fcntl.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "cache_server/store/data_file_chunk_store.h"
#include "cache_server/store/held_blocks.h"
#include "common/base/filled_string.h"
#include "common/base/logging.h"
#include "common/base/status.h"
#include "common/dataset/block_checksums.h"
#include "common/dataset/chunk_math.h"
#include "common/dataset/hash.h"

namespace granary::store {
namespace {

absl::Status NotCached(const ChunkKey& key) {
  return absl::NotFoundError(absl::StrCat("chunk ", key.ToString(), " is not cached"));
}

// DATA_LOSS unless the entry's block checksums describe its chunk in blocks
// that O_DIRECT can read (a damaged entry, not damaged data).
absl::Status CheckBlockLayout(const v1::ChunkLocation& location, const DataFile& file) {
  const uint64_t block_bytes = location.checksum_block_bytes();
  if (!HasBlockChecksums(location) || block_bytes % kBlockBytes != 0) {
    return absl::DataLossError(
        absl::StrCat("index entry of the chunk at offset ", location.offset(), " of ", file.path(),
                     " holds ", location.block_xxh3_size(), " checksums of ", block_bytes,
                     "-byte blocks for ", location.length(), " bytes"));
  }
  return absl::OkStatus();
}

// Checks `data`, the `length` bytes of the chunk at `location` that start at
// the beginning of its block `first_block` and end at the end of a block (or
// of the chunk), against their block checksums; the layout must have passed
// CheckBlockLayout. DATA_LOSS on a mismatch.
absl::Status CheckBlocks(const v1::ChunkLocation& location, const DataFile& file,
                         uint64_t first_block, const char* data, uint64_t length) {
  if (std::optional<uint64_t> block = MismatchedBlock(location, first_block, data, length)) {
    return absl::DataLossError(absl::StrCat("checksum mismatch in block ", *block,
                                            " of the chunk at offset ", location.offset(), " of ",
                                            file.path()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> DataFileChunkStore::ReadVerified(DataFile& file,
                                                             const v1::ChunkLocation& location) {
  return FilledString(location.length(), [&](std::span<char> out) {
    return ReadVerifiedInto(file, location, out.data());
  });
}

absl::Status DataFileChunkStore::ReadVerifiedInto(DataFile& file, const v1::ChunkLocation& location,
                                                  char* out) {
  const uint64_t length = location.length();
  GRANARY_ASSIGN_OR_RETURN(SharedFd fd, file.Descriptor());
  Xxh3Stream hash;
  absl::Status status;
  if (file.direct_io()) {
    std::unique_ptr<AlignedBuffer> buffer = buffers_.Take(length);
    uint64_t copied = 0;
    status = io_->Read(fd->get(), /*direct=*/true, location.offset(),
                       {buffer->data(), RoundUpToBlock(length)},
                       [&](const char* piece, uint64_t piece_length) {
                         const uint64_t useful = std::min(piece_length, length - copied);
                         std::memcpy(out + copied, piece, useful);
                         hash.Update(piece, useful);
                         copied += useful;
                       });
    buffers_.Give(std::move(buffer));
  } else {
    status = io_->Read(
        fd->get(), /*direct=*/false, location.offset(), {out, length},
        [&](const char* piece, uint64_t piece_length) { hash.Update(piece, piece_length); });
  }
  read_bytes_ += file.direct_io() ? RoundUpToBlock(length) : length;
  GRANARY_RETURN_IF_ERROR(status);
  if (hash.Digest() != location.xxh3()) {
    return absl::DataLossError(
        absl::StrCat("checksum mismatch in ", file.path(), " at offset ", location.offset()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> DataFileChunkStore::ReadRangeVerified(DataFile& file,
                                                                  const v1::ChunkLocation& location,
                                                                  uint64_t offset,
                                                                  uint64_t length) {
  if (offset == 0 && length == location.length() && !IsPartial(location)) {
    return ReadVerified(file, location);
  }
  if (location.block_xxh3_size() == 0) {
    // An entry from before block checksums: only the whole chunk can be checked.
    GRANARY_ASSIGN_OR_RETURN(std::string whole, ReadVerified(file, location));
    return whole.substr(offset, length);
  }
  if (length == 0) return std::string();
  GRANARY_RETURN_IF_ERROR(CheckBlockLayout(location, file));
  const auto [first_block, begin, end] = BlocksCovering(location, offset, length);
  // O_DIRECT reads whole 4 KiB blocks: blocks are multiples of them, and the
  // chunk's last one is zero-padded in its data file.
  const uint64_t read_bytes = file.direct_io() ? RoundUpToBlock(end - begin) : end - begin;
  GRANARY_ASSIGN_OR_RETURN(SharedFd fd, file.Descriptor());
  std::unique_ptr<AlignedBuffer> buffer = buffers_.Take(read_bytes);
  absl::Status status = io_->Read(fd->get(), file.direct_io(), location.offset() + begin,
                                  {buffer->data(), read_bytes}, [](const char*, uint64_t) {});
  read_bytes_ += read_bytes;
  if (status.ok()) status = CheckBlocks(location, file, first_block, buffer->data(), end - begin);
  std::string data;
  if (status.ok()) data.assign(buffer->data() + (offset - begin), length);
  buffers_.Give(std::move(buffer));
  GRANARY_RETURN_IF_ERROR(status);
  return data;
}

absl::StatusOr<std::string> DataFileChunkStore::Read(const ChunkKey& key) {
  return ReadChunk(key, std::nullopt);
}

absl::StatusOr<std::string> DataFileChunkStore::ReadRange(const ChunkKey& key, uint64_t offset,
                                                          uint64_t length) {
  return ReadChunk(key, ByteRange{.offset = offset, .length = length});
}

absl::StatusOr<std::string> DataFileChunkStore::ReadChunk(const ChunkKey& key,
                                                          std::optional<ByteRange> range) {
  const std::string encoded = key.Encode();
  GRANARY_ASSIGN_OR_RETURN(std::optional<Found> found, Find(encoded));
  if (!found) {
    misses_++;
    return NotCached(key);
  }
  const v1::ChunkLocation& location = found->location;
  DataFile& file = *found->file;
  if (range &&
      (range->offset > location.length() || range->length > location.length() - range->offset)) {
    return absl::OutOfRangeError(absl::StrCat("range [", range->offset, ", +", range->length,
                                              ") is past the end of chunk ", key.ToString(), " (",
                                              location.length(), " bytes)"));
  }
  // Of a chunk held in part, only ranges inside its blocks are held.
  if (IsPartial(location) && (!range || !HoldsRange(location, range->offset, range->length))) {
    misses_++;
    return NotCached(key);
  }
  absl::StatusOr<std::string> data =
      range ? ReadRangeVerified(file, location, range->offset, range->length)
            : ReadVerified(file, location);
  if (!data.ok()) {
    if (data.status().code() == absl::StatusCode::kDataLoss) checksum_failures_++;
    GRANARY_LOG_FIRST_N(WARNING, 20)
        << "chunk store: dropping " << key.ToString() << ": " << data.status().message();
    {
      MutexLock lock(&mu_);
      DropLocked(encoded, location);
    }
    misses_++;
    return NotCached(key);
  }
  hits_++;
  return data;
}

absl::Status DataFileChunkStore::VerifyChunk(DataFile& file, const v1::ChunkLocation& location,
                                             std::string& scratch) {
  if (IsPartial(location)) {
    GRANARY_RETURN_IF_ERROR(CheckBlockLayout(location, file));
    for (const HeldExtent& extent : HeldExtents(location)) {
      GRANARY_RETURN_IF_ERROR(
          ReadRangeVerified(file, location, extent.begin, extent.end - extent.begin).status());
    }
    return absl::OkStatus();
  }
  scratch.resize(location.length());
  GRANARY_RETURN_IF_ERROR(ReadVerifiedInto(file, location, scratch.data()));
  if (location.block_xxh3_size() == 0) return absl::OkStatus();
  GRANARY_RETURN_IF_ERROR(CheckBlockLayout(location, file));
  return CheckBlocks(location, file, 0, scratch.data(), location.length());
}

absl::StatusOr<ChunkStore::Extent> DataFileChunkStore::Locate(const ChunkKey& key) {
  GRANARY_ASSIGN_OR_RETURN(std::optional<Found> found, Find(key.Encode()));
  // Opened by path, not dup()ed: the store's own descriptor may be O_DIRECT
  // and is writable. A file unlinked since the lookup is a miss, and so is a
  // chunk held in part (its reader reads it whole).
  const bool whole = found && !IsPartial(found->location);
  UniqueFd fd(whole ? ::open(found->file->path().c_str(), O_RDONLY | O_CLOEXEC) : -1);
  if (!fd.valid()) {
    misses_++;
    return NotCached(key);
  }
  hits_++;
  return Extent{std::move(fd), std::move(found->location)};
}

}  // namespace granary::store
