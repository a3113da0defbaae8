// The segment-file implementation of ChunkStore.
//
// Placement: every dataset version has at most one open segment, in the cache
// directory holding the fewest bytes; chunks are appended to it (block-aligned
// and zero-padded) until it reaches segment_bytes, when it is closed. So a
// segment holds one version only, and eviction can reclaim whole segments (see
// eviction_policy.h).
//
// Capacity: disk bytes are the sum of segment file sizes, reserved under the
// lock before a chunk is written; a reservation that would pass the capacity
// first reclaims victim segments, or the chunk is declined. Reserved bytes of
// a failed write stay counted until their segment is reclaimed, so the count
// never falls below what is on disk.
//
// Crash safety: a chunk's bytes are written (pwrite returns once the kernel
// has them) before its index entry is put, and a segment's entries are
// deleted before its file is unlinked. A killed process therefore leaves an
// index whose every entry points at complete bytes: the kernel keeps what was
// written, and RocksDB's write-ahead log keeps the index. No fsync is needed
// for that, which keeps inserts fast. Against power loss, which can drop
// unsynced file data, a segment is fdatasync'ed and marked sealed in the
// background once it is closed (segment_sealer.h). On open, every chunk of an
// unsealed segment (one being written or waiting to be synced) is read and
// verified and bad entries are dropped; tails past the last indexed chunk are
// truncated, and segment files the index does not reference are deleted.
// Reads verify XXH3 regardless, so even an undetected fault becomes a miss,
// not wrong bytes.
//
// Checksums: an entry holds the XXH3 of the whole chunk and one per checksum
// block. Read() and a range covering the whole chunk check the first, as the
// chunk streams in; a smaller range reads its covering blocks and checks
// each. Recovery checks both, so an entry it keeps is right for either read.
//
// Locking: one mutex guards the in-memory bookkeeping and orders every index
// mutation; segment I/O, checksumming and fdatasync run outside it. Readers
// hold a shared_ptr to the segment file, so reclaiming a segment never pulls
// a descriptor out from under a read in progress.
#include "cache_server/store/chunk_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <set>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "cache_server/store/aligned_buffer.h"
#include "cache_server/store/chunk_index.h"
#include "cache_server/store/eviction_policy.h"
#include "cache_server/store/io_engine.h"
#include "cache_server/store/segment_file.h"
#include "cache_server/store/segment_sealer.h"
#include "common/absl_compat.h"
#include "common/block_checksums.h"
#include "common/file_util.h"
#include "common/hash.h"
#include "common/logging.h"
#include "common/size.h"
#include "common/status.h"

namespace granary::store {
namespace {

// O_DIRECT staging buffers kept for reuse.
constexpr uint64_t kIdleBufferBytes = 128 << 20;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

absl::Status NotCached(const ChunkKey& key) {
  return absl::NotFoundError(absl::StrCat("chunk ", key.ToString(), " is not cached"));
}

// DATA_LOSS unless the entry's block checksums describe its chunk in blocks
// that O_DIRECT can read (a damaged entry, not damaged data).
absl::Status CheckBlockLayout(const v1::ChunkLocation& location, const SegmentFile& file) {
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
absl::Status CheckBlocks(const v1::ChunkLocation& location, const SegmentFile& file,
                         uint64_t first_block, const char* data, uint64_t length) {
  if (std::optional<uint64_t> block = MismatchedBlock(location, first_block, data, length)) {
    return absl::DataLossError(absl::StrCat("checksum mismatch in block ", *block,
                                            " of the chunk at offset ", location.offset(), " of ",
                                            file.path()));
  }
  return absl::OkStatus();
}

// Creates `directory` if needed, private to granaryd, and checks that files
// can be created in it.
absl::Status PrepareDirectory(const std::string& directory) {
  GRANARY_RETURN_IF_ERROR(CreatePrivateDirectory(directory, "cache directory"));
  const std::string probe = absl::StrCat(directory, "/.granary-write-probe");
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    return ErrnoStatus(errno, absl::StrCat("cache directory ", directory, " is not writable"));
  }
  ::close(fd);
  ::unlink(probe.c_str());
  return absl::OkStatus();
}

absl::Status ValidateOptions(const StoreOptions& options) {
  if (options.directories.empty()) {
    return absl::InvalidArgumentError("chunk store: no cache directories given");
  }
  if (std::set<std::string>(options.directories.begin(), options.directories.end()).size() !=
      options.directories.size()) {
    return absl::InvalidArgumentError("chunk store: a cache directory is listed twice");
  }
  if (options.index_path.empty()) {
    return absl::InvalidArgumentError("chunk store: no index path given");
  }
  if (options.max_chunk_bytes == 0 ||
      options.max_chunk_bytes > std::numeric_limits<uint32_t>::max()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "chunk store: maximum chunk size ", options.max_chunk_bytes, " is not in 1 B - 4 GiB"));
  }
  if (options.capacity_bytes < RoundUpToBlock(options.max_chunk_bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "chunk store: capacity ", FormatSize(options.capacity_bytes),
        " is smaller than one chunk of the maximum size, ", FormatSize(options.max_chunk_bytes)));
  }
  if (options.segment_bytes == 0) {
    return absl::InvalidArgumentError("chunk store: segment size must not be 0");
  }
  if (options.queue_depth == 0) {
    return absl::InvalidArgumentError("chunk store: io_uring queue depth must not be 0");
  }
  if (options.checksum_block_bytes == 0 || options.checksum_block_bytes % kBlockBytes != 0 ||
      options.checksum_block_bytes > std::numeric_limits<uint32_t>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunk store: checksum block size ", options.checksum_block_bytes,
                     " is not a multiple of ", kBlockBytes, " bytes under 4 GiB"));
  }
  return absl::OkStatus();
}

class SegmentChunkStore final : public ChunkStore {
 public:
  SegmentChunkStore(const StoreOptions& options, std::unique_ptr<ChunkIndex> index,
                    std::unique_ptr<IoEngine> io)
      : options_(options),
        index_(std::move(index)),
        io_(std::move(io)),
        directory_bytes_(options.directories.size(), 0),
        sealer_([this](uint64_t segment_id) {
          // Under the lock like every index mutation: RocksDB would otherwise
          // merge concurrent writes on one thread, which TSan cannot follow
          // in the uninstrumented library.
          std::lock_guard lock(mu_);
          return index_->MarkSealed(segment_id);
        }) {}

  // Rebuilds the bookkeeping from the index and the segment files, repairing
  // what a crash left behind (see the top of this file).
  absl::Status Recover();

  absl::StatusOr<std::string> Read(const ChunkKey& key) override;
  absl::StatusOr<std::string> ReadRange(const ChunkKey& key, uint64_t offset,
                                        uint64_t length) override;
  absl::StatusOr<Extent> Locate(const ChunkKey& key) override;
  bool Contains(const ChunkKey& key) override;
  absl::StatusOr<bool> Insert(const ChunkKey& key, std::string_view data) override;
  void SetVersionState(uint64_t dataset_version, VersionState state) override;
  absl::StatusOr<uint64_t> RemoveVersion(uint64_t dataset_version) override;
  uint64_t CachedBytes(uint64_t dataset_version) override;
  std::vector<ChunkKey> ChunksOf(uint64_t dataset_version) override;
  StoreStats Stats() override;

 private:
  struct Segment {
    std::shared_ptr<SegmentFile> file;
    uint32_t directory = 0;
    uint64_t dataset_version = 0;
    uint64_t end = 0;  // Bytes reserved: the file's size once pending writes land.
    uint64_t live_bytes = 0;
    uint64_t live_chunks = 0;
    int64_t last_use_ms = 0;
    int pending_writes = 0;
    bool accepting = false;  // Its version's open segment.
    bool sealed = false;     // Synced and marked, or being so.
  };

  // Where a reserved chunk goes.
  struct Placement {
    std::shared_ptr<SegmentFile> file;
    uint32_t directory = 0;
    uint64_t offset = 0;
  };

  VersionState StateLocked(uint64_t dataset_version) const;
  // The usage of every segment, or of those with no write in progress.
  std::vector<SegmentUsage> UsageLocked(bool only_idle) const;
  // Takes `bytes` off the version's live bytes, forgetting it at zero.
  void ForgetVersionBytesLocked(uint64_t dataset_version, uint64_t bytes);
  // Reserves `bytes` in the version's open segment (reclaiming others or
  // opening a new one as needed); nullopt when the policy declines.
  absl::StatusOr<std::optional<Placement>> ReserveLocked(uint64_t dataset_version, uint64_t bytes);
  absl::StatusOr<Segment*> OpenSegmentLocked(uint64_t dataset_version);
  absl::Status ReclaimLocked(uint64_t segment_id);
  // Drops `key` if the index still maps it to `location`.
  void DropLocked(std::string_view key, const v1::ChunkLocation& location);
  // Reclaims `segment` if it takes no more chunks, has no write in flight and
  // holds no live chunk.
  void ReclaimIfDeadLocked(const Segment& segment);
  // Hands the segment to the sealer once it is closed and idle.
  void MaybeSealLocked(Segment& segment);

  absl::Status WriteChunk(SegmentFile& file, uint64_t offset, std::string_view data);
  // The chunk's bytes; DATA_LOSS when they do not match its checksum.
  absl::StatusOr<std::string> ReadVerified(SegmentFile& file, const v1::ChunkLocation& location);
  // Reads the chunk into `out` (location.length() bytes) and verifies it.
  absl::Status ReadVerifiedInto(SegmentFile& file, const v1::ChunkLocation& location, char* out);
  // Bytes [offset, offset + length) of the chunk, which the caller checked lie
  // inside it; DATA_LOSS when a block covering them does not match.
  absl::StatusOr<std::string> ReadRangeVerified(SegmentFile& file,
                                                const v1::ChunkLocation& location, uint64_t offset,
                                                uint64_t length);
  struct ByteRange {
    uint64_t offset = 0;
    uint64_t length = 0;
  };
  struct Found {
    v1::ChunkLocation location;
    std::shared_ptr<SegmentFile> file;
  };
  // The index entry of the chunk and its segment, which counts as used;
  // nullopt on a miss.
  absl::StatusOr<std::optional<Found>> Find(std::string_view encoded_key);
  // Read() (no range) and ReadRange(): the lookup, the verified read, and
  // dropping an entry that does not verify.
  absl::StatusOr<std::string> ReadChunk(const ChunkKey& key, std::optional<ByteRange> range);

  const StoreOptions options_;
  const std::unique_ptr<ChunkIndex> index_;
  const std::unique_ptr<IoEngine> io_;
  AlignedBufferPool buffers_{kIdleBufferBytes};

  std::mutex mu_;
  std::condition_variable insert_done_;
  std::map<uint64_t, Segment> segments_;             // By id.
  std::map<uint64_t, uint64_t> open_segments_;       // Version → segment id.
  std::map<uint64_t, VersionState> version_states_;  // Absent: kInactive.
  std::map<uint64_t, uint64_t> version_bytes_;       // Live bytes per version.
  absl::flat_hash_set<std::string> inserting_;       // Keys being written.
  std::vector<uint64_t> directory_bytes_;
  uint64_t disk_bytes_ = 0;
  uint64_t used_bytes_ = 0;
  uint64_t chunk_count_ = 0;
  uint64_t next_segment_id_ = 1;

  std::atomic<uint64_t> hits_{0};
  std::atomic<uint64_t> misses_{0};
  std::atomic<uint64_t> checksum_failures_{0};
  std::atomic<uint64_t> inserts_{0};
  std::atomic<uint64_t> admissions_refused_{0};
  std::atomic<uint64_t> insert_errors_{0};
  std::atomic<uint64_t> evicted_chunks_{0};
  std::atomic<uint64_t> read_bytes_{0};

  // Last, so that its thread stops before anything it uses is destroyed.
  SegmentSealer sealer_;
};

VersionState SegmentChunkStore::StateLocked(uint64_t dataset_version) const {
  auto it = version_states_.find(dataset_version);
  return it == version_states_.end() ? VersionState::kInactive : it->second;
}

std::vector<SegmentUsage> SegmentChunkStore::UsageLocked(bool only_idle) const {
  std::vector<SegmentUsage> usage;
  for (const auto& [id, segment] : segments_) {
    if (only_idle && segment.pending_writes > 0) continue;
    usage.push_back({.id = id,
                     .file_bytes = segment.end,
                     .last_use_ms = segment.last_use_ms,
                     .state = StateLocked(segment.dataset_version)});
  }
  return usage;
}

void SegmentChunkStore::ForgetVersionBytesLocked(uint64_t dataset_version, uint64_t bytes) {
  if (auto it = version_bytes_.find(dataset_version); it != version_bytes_.end()) {
    it->second -= bytes;
    if (it->second == 0) version_bytes_.erase(it);
  }
}

absl::StatusOr<std::optional<SegmentChunkStore::Placement>> SegmentChunkStore::ReserveLocked(
    uint64_t dataset_version, uint64_t bytes) {
  if (disk_bytes_ + bytes > options_.capacity_bytes) {
    auto victims = ChooseVictims(options_.eviction, bytes, options_.capacity_bytes - disk_bytes_,
                                 UsageLocked(/*only_idle=*/true));
    if (!victims) return std::nullopt;
    for (uint64_t id : *victims) {
      evicted_chunks_ += segments_.at(id).live_chunks;
      GRANARY_RETURN_IF_ERROR(ReclaimLocked(id));
    }
  }
  GRANARY_ASSIGN_OR_RETURN(Segment * segment, OpenSegmentLocked(dataset_version));
  Placement placement{
      .file = segment->file, .directory = segment->directory, .offset = segment->end};
  segment->end += bytes;
  segment->pending_writes++;
  disk_bytes_ += bytes;
  directory_bytes_[segment->directory] += bytes;
  if (segment->end >= options_.segment_bytes) {
    segment->accepting = false;
    open_segments_.erase(dataset_version);
  }
  return placement;
}

absl::StatusOr<SegmentChunkStore::Segment*> SegmentChunkStore::OpenSegmentLocked(
    uint64_t dataset_version) {
  if (auto it = open_segments_.find(dataset_version); it != open_segments_.end()) {
    return &segments_.at(it->second);
  }
  const auto directory =
      static_cast<uint32_t>(std::min_element(directory_bytes_.begin(), directory_bytes_.end()) -
                            directory_bytes_.begin());
  const uint64_t id = next_segment_id_++;
  GRANARY_ASSIGN_OR_RETURN(
      std::unique_ptr<SegmentFile> file,
      SegmentFile::Create(options_.directories[directory], id, options_.direct_io));
  Segment& segment = segments_[id];
  segment.file = std::move(file);
  segment.directory = directory;
  segment.dataset_version = dataset_version;
  segment.last_use_ms = NowMs();
  segment.accepting = true;
  open_segments_[dataset_version] = id;
  return &segment;
}

absl::Status SegmentChunkStore::ReclaimLocked(uint64_t segment_id) {
  Segment& segment = segments_.at(segment_id);
  // Entries go first: a crash in between leaves an unreferenced file, which
  // the next open deletes, never an entry pointing into a missing file.
  GRANARY_RETURN_IF_ERROR(index_->DeleteSegment(segment_id));
  GRANARY_RETURN_IF_ERROR(segment.file->Unlink());
  disk_bytes_ -= segment.end;
  directory_bytes_[segment.directory] -= segment.end;
  used_bytes_ -= segment.live_bytes;
  chunk_count_ -= segment.live_chunks;
  ForgetVersionBytesLocked(segment.dataset_version, segment.live_bytes);
  if (auto it = open_segments_.find(segment.dataset_version);
      it != open_segments_.end() && it->second == segment_id) {
    open_segments_.erase(it);
  }
  segments_.erase(segment_id);
  return absl::OkStatus();
}

void SegmentChunkStore::DropLocked(std::string_view key, const v1::ChunkLocation& location) {
  auto current = index_->Get(key);
  if (!current.ok() || !current->has_value() || (*current)->segment_id() != location.segment_id() ||
      (*current)->offset() != location.offset()) {
    return;  // Already dropped, or replaced by a new copy.
  }
  if (absl::Status deleted = index_->Delete(key, location.segment_id()); !deleted.ok()) {
    GRANARY_LOG(ERROR) << "chunk store: " << deleted.message();
    return;
  }
  auto it = segments_.find(location.segment_id());
  if (it == segments_.end()) return;
  Segment& segment = it->second;
  segment.live_bytes -= location.length();
  segment.live_chunks--;
  used_bytes_ -= location.length();
  chunk_count_--;
  ForgetVersionBytesLocked(segment.dataset_version, location.length());
  ReclaimIfDeadLocked(segment);
}

void SegmentChunkStore::ReclaimIfDeadLocked(const Segment& segment) {
  if (segment.live_chunks > 0 || segment.accepting || segment.pending_writes > 0) return;
  if (absl::Status reclaimed = ReclaimLocked(segment.file->id()); !reclaimed.ok()) {
    GRANARY_LOG(ERROR) << "chunk store: " << reclaimed.message();
  }
}

void SegmentChunkStore::MaybeSealLocked(Segment& segment) {
  if (segment.accepting || segment.sealed || segment.pending_writes > 0 ||
      segment.live_chunks == 0) {
    return;
  }
  segment.sealed = true;
  sealer_.Seal(segment.file);
}

absl::Status SegmentChunkStore::WriteChunk(SegmentFile& file, uint64_t offset,
                                           std::string_view data) {
  if (file.direct_io()) {
    std::unique_ptr<AlignedBuffer> buffer = buffers_.Take(data.size());
    const uint64_t padded = RoundUpToBlock(data.size());
    std::memcpy(buffer->data(), data.data(), data.size());
    std::memset(buffer->data() + data.size(), 0, padded - data.size());
    absl::Status written = io_->Write(file.fd(), /*direct=*/true, offset, {buffer->data(), padded});
    buffers_.Give(std::move(buffer));
    return written;
  }
  const uint64_t whole_blocks = data.size() / kBlockBytes * kBlockBytes;
  GRANARY_RETURN_IF_ERROR(
      io_->Write(file.fd(), /*direct=*/false, offset, {data.data(), whole_blocks}));
  if (whole_blocks == data.size()) return absl::OkStatus();
  char last_block[kBlockBytes] = {};
  std::memcpy(last_block, data.data() + whole_blocks, data.size() - whole_blocks);
  return io_->Write(file.fd(), /*direct=*/false, offset + whole_blocks, {last_block, kBlockBytes});
}

absl::StatusOr<std::string> SegmentChunkStore::ReadVerified(SegmentFile& file,
                                                            const v1::ChunkLocation& location) {
  absl::Status status;
  std::string data;
  // Filled in place: zeroing a multi-megabyte string first would cost as
  // much as a third of a page-cache read. Reserved first: GCC 12's
  // resize_and_overwrite mis-sizes a string it has to grow by less than
  // twice (a 24-byte chunk came back as 30 bytes).
  data.reserve(location.length());
  data.resize_and_overwrite(location.length(), [&](char* out, size_t length) {
    status = ReadVerifiedInto(file, location, out);
    return length;
  });
  GRANARY_RETURN_IF_ERROR(status);
  return data;
}

absl::Status SegmentChunkStore::ReadVerifiedInto(SegmentFile& file,
                                                 const v1::ChunkLocation& location, char* out) {
  const uint64_t length = location.length();
  Xxh3Stream hash;
  absl::Status status;
  if (file.direct_io()) {
    std::unique_ptr<AlignedBuffer> buffer = buffers_.Take(length);
    uint64_t copied = 0;
    status = io_->Read(file.fd(), /*direct=*/true, location.offset(),
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
        file.fd(), /*direct=*/false, location.offset(), {out, length},
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

absl::StatusOr<std::string> SegmentChunkStore::ReadRangeVerified(SegmentFile& file,
                                                                 const v1::ChunkLocation& location,
                                                                 uint64_t offset, uint64_t length) {
  if (offset == 0 && length == location.length()) return ReadVerified(file, location);
  if (location.block_xxh3_size() == 0) {
    // An entry from before block checksums: only the whole chunk can be checked.
    GRANARY_ASSIGN_OR_RETURN(std::string whole, ReadVerified(file, location));
    return whole.substr(offset, length);
  }
  if (length == 0) return std::string();
  GRANARY_RETURN_IF_ERROR(CheckBlockLayout(location, file));
  // The covering blocks, [begin, end) of the chunk.
  const uint64_t block_bytes = location.checksum_block_bytes();
  const uint64_t first_block = offset / block_bytes;
  const uint64_t begin = first_block * block_bytes;
  const uint64_t end = std::min<uint64_t>(
      location.length(), (offset + length + block_bytes - 1) / block_bytes * block_bytes);
  // O_DIRECT reads whole 4 KiB blocks: blocks are multiples of them, and the
  // chunk's last one is zero-padded in its segment.
  const uint64_t read_bytes = file.direct_io() ? RoundUpToBlock(end - begin) : end - begin;
  std::unique_ptr<AlignedBuffer> buffer = buffers_.Take(read_bytes);
  absl::Status status = io_->Read(file.fd(), file.direct_io(), location.offset() + begin,
                                  {buffer->data(), read_bytes}, [](const char*, uint64_t) {});
  read_bytes_ += read_bytes;
  if (status.ok()) status = CheckBlocks(location, file, first_block, buffer->data(), end - begin);
  std::string data;
  if (status.ok()) data.assign(buffer->data() + (offset - begin), length);
  buffers_.Give(std::move(buffer));
  GRANARY_RETURN_IF_ERROR(status);
  return data;
}

absl::StatusOr<std::string> SegmentChunkStore::Read(const ChunkKey& key) {
  return ReadChunk(key, std::nullopt);
}

absl::StatusOr<std::string> SegmentChunkStore::ReadRange(const ChunkKey& key, uint64_t offset,
                                                         uint64_t length) {
  return ReadChunk(key, ByteRange{.offset = offset, .length = length});
}

absl::StatusOr<std::string> SegmentChunkStore::ReadChunk(const ChunkKey& key,
                                                         std::optional<ByteRange> range) {
  const std::string encoded = key.Encode();
  GRANARY_ASSIGN_OR_RETURN(std::optional<Found> found, Find(encoded));
  if (!found) {
    misses_++;
    return NotCached(key);
  }
  const v1::ChunkLocation& location = found->location;
  SegmentFile& file = *found->file;
  if (range &&
      (range->offset > location.length() || range->length > location.length() - range->offset)) {
    return absl::OutOfRangeError(absl::StrCat("range [", range->offset, ", +", range->length,
                                              ") is past the end of chunk ", key.ToString(), " (",
                                              location.length(), " bytes)"));
  }
  absl::StatusOr<std::string> data =
      range ? ReadRangeVerified(file, location, range->offset, range->length)
            : ReadVerified(file, location);
  if (!data.ok()) {
    if (data.status().code() == absl::StatusCode::kDataLoss) checksum_failures_++;
    GRANARY_LOG_FIRST_N(WARNING, 20)
        << "chunk store: dropping " << key.ToString() << ": " << data.status().message();
    {
      std::lock_guard lock(mu_);
      DropLocked(encoded, location);
    }
    misses_++;
    return NotCached(key);
  }
  hits_++;
  return data;
}

absl::StatusOr<ChunkStore::Extent> SegmentChunkStore::Locate(const ChunkKey& key) {
  GRANARY_ASSIGN_OR_RETURN(std::optional<Found> found, Find(key.Encode()));
  // Opened by path, not dup()ed: the store's own descriptor may be O_DIRECT
  // and is writable. A segment unlinked since the lookup is a miss.
  int segment_fd = found ? ::open(found->file->path().c_str(), O_RDONLY | O_CLOEXEC) : -1;
  if (segment_fd < 0) {
    misses_++;
    return NotCached(key);
  }
  hits_++;
  return Extent{segment_fd, std::move(found->location)};
}

absl::StatusOr<std::optional<SegmentChunkStore::Found>> SegmentChunkStore::Find(
    std::string_view encoded_key) {
  GRANARY_ASSIGN_OR_RETURN(std::optional<v1::ChunkLocation> location, index_->Get(encoded_key));
  if (!location) return std::nullopt;
  std::lock_guard lock(mu_);
  auto it = segments_.find(location->segment_id());
  if (it == segments_.end()) return std::nullopt;
  it->second.last_use_ms = NowMs();
  return Found{*std::move(location), it->second.file};
}

bool SegmentChunkStore::Contains(const ChunkKey& key) {
  auto location = index_->Get(key.Encode());
  return location.ok() && location->has_value();
}

absl::StatusOr<bool> SegmentChunkStore::Insert(const ChunkKey& key, std::string_view data) {
  if (data.size() > options_.max_chunk_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunk ", key.ToString(), " is ", FormatSize(data.size()),
                     ", over the maximum chunk size of ", FormatSize(options_.max_chunk_bytes)));
  }
  const std::string encoded = key.Encode();
  v1::ChunkLocation location;
  location.set_xxh3(Xxh3(data));
  SetBlockChecksums(data, options_.checksum_block_bytes, location);
  const uint64_t stored_bytes = RoundUpToBlock(data.size());
  Placement placement;
  {
    std::unique_lock lock(mu_);
    insert_done_.wait(lock, [&] { return !inserting_.contains(encoded); });
    GRANARY_ASSIGN_OR_RETURN(std::optional<v1::ChunkLocation> existing, index_->Get(encoded));
    if (existing) return true;
    absl::StatusOr<std::optional<Placement>> reserved =
        ReserveLocked(key.dataset_version, stored_bytes);
    if (!reserved.ok()) {
      insert_errors_++;  // A new segment file could not be made: the disk is full, say.
      return reserved.status();
    }
    if (!*reserved) {
      admissions_refused_++;
      return false;
    }
    placement = **std::move(reserved);
    inserting_.insert(encoded);
  }

  absl::Status status = WriteChunk(*placement.file, placement.offset, data);

  location.set_directory(placement.directory);
  location.set_segment_id(placement.file->id());
  location.set_offset(placement.offset);
  location.set_length(static_cast<uint32_t>(data.size()));
  location.set_dataset_version(key.dataset_version);
  location.set_last_use_unix_ms(NowMs());
  {
    std::lock_guard lock(mu_);
    inserting_.erase(encoded);
    insert_done_.notify_all();
    Segment& segment = segments_.at(placement.file->id());
    segment.pending_writes--;
    if (status.ok()) status = index_->Put(encoded, location);
    if (status.ok()) {
      segment.live_bytes += data.size();
      segment.live_chunks++;
      segment.last_use_ms = location.last_use_unix_ms();
      version_bytes_[key.dataset_version] += data.size();
      used_bytes_ += data.size();
      chunk_count_++;
      inserts_++;
    } else if (segment.accepting) {
      // Nothing more is appended after a hole the index does not describe.
      segment.accepting = false;
      open_segments_.erase(key.dataset_version);
    }
    MaybeSealLocked(segment);
    // A segment whose writes all failed (a full disk) holds nothing: its file
    // and the capacity it reserved go now, or they would pile up, one per
    // failed insert, until no chunk could be admitted.
    if (!status.ok()) ReclaimIfDeadLocked(segment);
  }
  if (!status.ok()) {
    insert_errors_++;
    return absl::Status(status.code(),
                        absl::StrCat("storing chunk ", key.ToString(), ": ", status.message()));
  }
  return true;
}

void SegmentChunkStore::SetVersionState(uint64_t dataset_version, VersionState state) {
  std::lock_guard lock(mu_);
  if (absl::Status saved = index_->SetVersionState(dataset_version, state); !saved.ok()) {
    GRANARY_LOG(ERROR) << "chunk store: " << saved.message();
  }
  if (state == VersionState::kInactive) {
    version_states_.erase(dataset_version);
  } else {
    version_states_[dataset_version] = state;
  }
}

absl::StatusOr<uint64_t> SegmentChunkStore::RemoveVersion(uint64_t dataset_version) {
  std::lock_guard lock(mu_);
  const auto it = version_bytes_.find(dataset_version);
  const uint64_t freed = it == version_bytes_.end() ? 0 : it->second;
  std::vector<uint64_t> segment_ids;
  for (const auto& [id, segment] : segments_) {
    if (segment.dataset_version == dataset_version) segment_ids.push_back(id);
  }
  for (uint64_t id : segment_ids) {
    if (segments_.at(id).pending_writes == 0) {
      GRANARY_RETURN_IF_ERROR(ReclaimLocked(id));
    }
  }
  // Segments with writes in flight keep their files; their indexed chunks go.
  GRANARY_ASSIGN_OR_RETURN(auto remaining, index_->ChunksOfVersion(dataset_version));
  for (const auto& [key, location] : remaining) DropLocked(key, location);
  GRANARY_RETURN_IF_ERROR(index_->SetVersionState(dataset_version, VersionState::kInactive));
  version_states_.erase(dataset_version);
  return freed;
}

uint64_t SegmentChunkStore::CachedBytes(uint64_t dataset_version) {
  std::lock_guard lock(mu_);
  auto it = version_bytes_.find(dataset_version);
  return it == version_bytes_.end() ? 0 : it->second;
}

std::vector<ChunkKey> SegmentChunkStore::ChunksOf(uint64_t dataset_version) {
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

StoreStats SegmentChunkStore::Stats() {
  StoreStats stats;
  {
    std::lock_guard lock(mu_);
    stats.used_bytes = used_bytes_;
    stats.disk_bytes = disk_bytes_;
    stats.chunk_count = chunk_count_;
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
  stats.io_engine = std::string(io_->name());
  return stats;
}

absl::Status SegmentChunkStore::Recover() {
  std::lock_guard lock(mu_);
  GRANARY_ASSIGN_OR_RETURN(version_states_, index_->VersionStates());
  GRANARY_ASSIGN_OR_RETURN(std::set<uint64_t> sealed, index_->SealedSegments());

  // Segment files on disk, by id.
  std::map<uint64_t, uint32_t> files;
  for (uint32_t d = 0; d < options_.directories.size(); ++d) {
    std::error_code error;
    for (const auto& entry : std::filesystem::directory_iterator(options_.directories[d], error)) {
      if (auto id = SegmentFile::ParseFileName(entry.path().filename().string())) {
        files[*id] = d;
        next_segment_id_ = std::max(next_segment_id_, *id + 1);
      }
    }
    if (error) {
      return ErrnoStatus(error.value(),
                         absl::StrCat("cannot list cache directory ", options_.directories[d]));
    }
  }

  // Index entries, grouped by segment; entries into missing files are stale.
  std::map<uint64_t, std::vector<std::pair<std::string, v1::ChunkLocation>>> chunks;
  std::vector<std::pair<std::string, uint64_t>> stale;
  GRANARY_RETURN_IF_ERROR(
      index_->ForEach([&](std::string_view key, const v1::ChunkLocation& location) {
        auto file = files.find(location.segment_id());
        if (file == files.end() || file->second != location.directory()) {
          stale.emplace_back(std::string(key), location.segment_id());
        } else {
          chunks[location.segment_id()].emplace_back(std::string(key), location);
        }
      }));
  for (const auto& [key, segment_id] : stale) {
    GRANARY_RETURN_IF_ERROR(index_->Delete(key, segment_id));
  }

  uint64_t verified = 0;
  uint64_t dropped = 0;
  std::string scratch;  // Where unsealed chunks are read to be verified.
  for (const auto& [id, directory] : files) {
    GRANARY_ASSIGN_OR_RETURN(
        std::shared_ptr<SegmentFile> file,
        SegmentFile::Open(options_.directories[directory], id, options_.direct_io));
    const bool was_sealed = sealed.contains(id);
    Segment segment;
    segment.file = file;
    segment.directory = directory;
    segment.sealed = true;
    for (const auto& [key, location] : chunks[id]) {
      if (!was_sealed) {
        verified++;
        scratch.resize(location.length());
        absl::Status checked = ReadVerifiedInto(*file, location, scratch.data());
        if (checked.ok() && location.block_xxh3_size() > 0) {
          checked = CheckBlockLayout(location, *file);
          if (checked.ok()) {
            checked = CheckBlocks(location, *file, 0, scratch.data(), location.length());
          }
        }
        if (!checked.ok()) {
          if (checked.code() == absl::StatusCode::kDataLoss) checksum_failures_++;
          dropped++;
          GRANARY_RETURN_IF_ERROR(index_->Delete(key, id));
          continue;
        }
      }
      segment.dataset_version = location.dataset_version();
      segment.end = std::max(segment.end, location.offset() + RoundUpToBlock(location.length()));
      segment.live_bytes += location.length();
      segment.live_chunks++;
      segment.last_use_ms = std::max(segment.last_use_ms, location.last_use_unix_ms());
    }
    if (segment.live_chunks == 0) {
      GRANARY_RETURN_IF_ERROR(index_->DeleteSegment(id));
      GRANARY_RETURN_IF_ERROR(file->Unlink());
      continue;
    }
    GRANARY_ASSIGN_OR_RETURN(uint64_t size, file->Size());
    if (size > segment.end) GRANARY_RETURN_IF_ERROR(file->Truncate(segment.end));
    if (!was_sealed) sealer_.Seal(file);
    disk_bytes_ += segment.end;
    directory_bytes_[directory] += segment.end;
    used_bytes_ += segment.live_bytes;
    chunk_count_ += segment.live_chunks;
    version_bytes_[segment.dataset_version] += segment.live_bytes;
    segments_.emplace(id, std::move(segment));
  }
  for (uint64_t id : sealed) {
    if (!files.contains(id)) GRANARY_RETURN_IF_ERROR(index_->DeleteSegment(id));
  }

  if (disk_bytes_ > options_.capacity_bytes) {
    for (uint64_t id : OverflowOrder(UsageLocked(/*only_idle=*/false))) {
      if (disk_bytes_ <= options_.capacity_bytes) break;
      evicted_chunks_ += segments_.at(id).live_chunks;
      GRANARY_RETURN_IF_ERROR(ReclaimLocked(id));
    }
  }
  GRANARY_LOG(INFO) << "chunk store: " << chunk_count_ << " chunks, " << FormatSize(disk_bytes_)
                    << " of " << FormatSize(options_.capacity_bytes) << " in " << segments_.size()
                    << " segments; verified " << verified << " unsealed chunks, dropped " << dropped
                    << "; io engine " << io_->name();
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<ChunkStore>> ChunkStore::Open(const StoreOptions& options) {
  GRANARY_RETURN_IF_ERROR(ValidateOptions(options));
  for (const std::string& directory : options.directories) {
    GRANARY_RETURN_IF_ERROR(PrepareDirectory(directory));
  }
  GRANARY_ASSIGN_OR_RETURN(std::unique_ptr<ChunkIndex> index, ChunkIndex::Open(options.index_path));
  auto store = std::make_unique<SegmentChunkStore>(
      options, std::move(index), IoEngine::Create(options.use_io_uring, options.queue_depth));
  GRANARY_RETURN_IF_ERROR(store->Recover());
  return store;
}

}  // namespace granary::store
