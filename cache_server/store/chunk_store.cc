// The data-file implementation of ChunkStore.
//
// Placement: a chunk goes into the data file of its source file (one per
// dataset version and file id), created in the cache directory holding the
// fewest bytes, at chunk_index × chunk size. So a data file holds one version
// only, and eviction can reclaim whole files (see eviction_policy.h).
//
// Capacity: disk bytes are the chunks' lengths rounded up to whole blocks,
// reserved under the lock before a chunk is written; a reservation that would
// pass the capacity first reclaims victim files (a little more than needed,
// so that a store of many small files does not choose victims at every
// insert), or the chunk is declined. Reserved bytes of a failed write stay
// counted until their file is reclaimed, so the count never falls below what
// is on disk.
//
// Crash safety: a chunk's bytes are written (pwrite returns once the kernel
// has them) before its index entry is put, and a file's entries are deleted
// before the file is unlinked. A killed process therefore leaves an index
// whose every entry points at complete bytes: the kernel keeps what was
// written, and RocksDB's write-ahead log keeps the index. No fsync is needed
// for that, which keeps inserts fast. Against power loss, which can drop
// unsynced file data, a file is fdatasync'ed and marked synced in the
// background once no write is in flight on it (data_file_syncer.h); the entry
// of a chunk added to a synced file drops the mark in the same index write.
// On open, every chunk of an unsynced file is read and verified and bad
// entries are dropped; tails past the last indexed chunk are truncated, and
// data files the index does not reference are deleted (as are the segment
// files of the layout before data files, whose entries no longer resolve).
// Reads verify XXH3 regardless, so even an undetected fault becomes a miss,
// not wrong bytes.
//
// Whole files: a data file is handed out whole (OpenWholeFile) only when it
// holds every chunk of its source file, each where the source file has it,
// and each was verified after its last write in this process: written here
// from bytes the store checksummed (a file created by this process), or read
// back and checked at the first such request. Either is remembered until the
// file is written again, by the store or by anyone else (its ctime, taken
// after the store's last write and checked at every request, changes).
//
// Checksums: an entry holds the XXH3 of the whole chunk and one per checksum
// block. Read() and a range covering the whole chunk check the first, as the
// chunk streams in; a smaller range reads its covering blocks and checks
// each. Recovery checks both, so an entry it keeps is right for either read.
//
// Locking: one mutex guards the in-memory bookkeeping and orders every index
// mutation; file I/O, checksumming and fdatasync run outside it. A read holds
// the data file's descriptor (DescriptorCache) while it runs, so neither
// reclaiming the file nor closing idle descriptors pulls one out from under
// it; a file reclaimed before its read reopened it is a miss.
#include "cache_server/store/chunk_store.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "cache_server/store/aligned_buffer.h"
#include "cache_server/store/chunk_index.h"
#include "cache_server/store/data_file.h"
#include "cache_server/store/data_file_syncer.h"
#include "cache_server/store/descriptor_cache.h"
#include "cache_server/store/eviction_policy.h"
#include "cache_server/store/io_engine.h"
#include "common/absl_compat.h"
#include "common/block_checksums.h"
#include "common/chunk_math.h"
#include "common/file_util.h"
#include "common/filled_string.h"
#include "common/hash.h"
#include "common/logging.h"
#include "common/mutex.h"
#include "common/size.h"
#include "common/status.h"
#include "common/wall_clock.h"

namespace granary::store {
namespace {

// O_DIRECT staging buffers kept for reuse.
constexpr uint64_t kIdleBufferBytes = 128 << 20;

bool SameTime(const struct timespec& a, const struct timespec& b) {
  return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

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

// Creates `directory` and its data file folders if needed, private to
// granaryd, and checks that files can be created in it.
absl::Status PrepareDirectory(const std::string& directory) {
  GRANARY_RETURN_IF_ERROR(CreatePrivateDirectory(directory, "cache directory"));
  const std::string probe = absl::StrCat(directory, "/.granary-write-probe");
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    return ErrnoStatus(errno, absl::StrCat("cache directory ", directory, " is not writable"));
  }
  ::close(fd);
  ::unlink(probe.c_str());
  for (int i = 0; i < DataFile::kSubdirectories; ++i) {
    GRANARY_RETURN_IF_ERROR(CreatePrivateDirectory(
        absl::StrCat(directory, "/", DataFile::SubdirectoryName(i)), "cache directory"));
  }
  return absl::OkStatus();
}

// Frees the blocks of `file` below `end` that hold no indexed chunk: bytes
// of writes a crash cut off before their entries were put, which would
// otherwise take disk space the capacity does not count.
absl::Status PunchUnindexedRanges(const DataFile& file,
                                  std::vector<std::pair<std::string, v1::ChunkLocation>>& chunks,
                                  uint64_t end) {
  std::sort(chunks.begin(), chunks.end(),
            [](const auto& a, const auto& b) { return a.second.offset() < b.second.offset(); });
  GRANARY_ASSIGN_OR_RETURN(SharedFd fd, file.Descriptor());
  uint64_t covered = 0;  // Block-aligned end of the chunks so far.
  auto punch = [&](uint64_t until) -> absl::Status {
    const uint64_t hole_end = until / kBlockBytes * kBlockBytes;
    if (hole_end <= covered) return absl::OkStatus();
    if (::fallocate(fd->get(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                    static_cast<off_t>(covered), static_cast<off_t>(hole_end - covered)) != 0) {
      return ErrnoStatus(errno, absl::StrCat("punch a hole in ", file.path()));
    }
    return absl::OkStatus();
  };
  for (const auto& [key, location] : chunks) {
    GRANARY_RETURN_IF_ERROR(punch(location.offset()));
    covered = std::max(covered, RoundUpToBlock(location.offset() + location.length()));
  }
  return punch(RoundUpToBlock(end));
}

size_t OpenDataFileBudget(const StoreOptions& options) {
  if (options.max_open_data_files > 0) return options.max_open_data_files;
  constexpr size_t kWithoutLimit = 4096;  // When the limit cannot be read, or is infinite.
  struct rlimit files;
  if (::getrlimit(RLIMIT_NOFILE, &files) != 0 || files.rlim_cur == RLIM_INFINITY) {
    return kWithoutLimit;
  }
  return std::max<size_t>(files.rlim_cur / 4, 1);
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

class DataFileChunkStore final : public ChunkStore {
 public:
  DataFileChunkStore(const StoreOptions& options, std::unique_ptr<ChunkIndex> index,
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

  // Rebuilds the bookkeeping from the index and the data files, repairing
  // what a crash left behind (see the top of this file).
  absl::Status Recover();

  absl::StatusOr<std::string> Read(const ChunkKey& key) override;
  absl::StatusOr<std::string> ReadRange(const ChunkKey& key, uint64_t offset,
                                        uint64_t length) override;
  absl::StatusOr<Extent> Locate(const ChunkKey& key) override;
  absl::StatusOr<WholeFile> OpenWholeFile(uint64_t dataset_version, uint64_t file_id, uint64_t size,
                                          uint32_t chunk_size, WholeFileUse use) override;
  void RecordUse(uint64_t dataset_version, uint64_t file_id, uint64_t chunks) override;
  Withdrawn WithdrawnSince(uint64_t after) override;
  bool Contains(const ChunkKey& key) override;
  absl::StatusOr<bool> Insert(const ChunkKey& key, uint32_t chunk_size,
                              std::string_view data) override;
  void SetVersionState(uint64_t dataset_version, VersionState state) override;
  absl::StatusOr<uint64_t> RemoveVersion(uint64_t dataset_version) override;
  uint64_t CachedBytes(uint64_t dataset_version) override;
  std::vector<ChunkKey> ChunksOf(uint64_t dataset_version) override;
  StoreStats Stats() override;

 private:
  // A source file of a dataset version: (version, file id).
  using SourceFile = std::pair<uint64_t, uint64_t>;

  // The bookkeeping of one data file.
  struct CachedFile {
    std::shared_ptr<DataFile> file;
    uint32_t directory = 0;
    SourceFile source;
    uint64_t disk_bytes = 0;  // Blocks reserved: the file's blocks once pending writes land.
    // Where chunks were dropped, or failed to be written, while the file
    // stayed: their blocks are still counted in disk_bytes (and allocated
    // until the next open punches them out), so a chunk written there again
    // takes no more.
    absl::flat_hash_set<uint64_t> unindexed_offsets;
    uint64_t live_bytes = 0;
    uint64_t live_chunks = 0;
    int64_t last_use_ms = 0;
    int pending_writes = 0;
    uint64_t generation = 1;         // Bumped by every write.
    uint64_t queued_generation = 0;  // Last generation handed to the syncer.
    bool synced = false;             // Marked synced in the index.
    // Created by this process, and no chunk of it has failed to verify since:
    // every chunk it holds was written from bytes whose checksums the store
    // computed, so they need not be read back before the file is handed out.
    bool written_here = false;
    uint64_t verified_generation = 0;  // Generation every chunk was last verified at.
    // The data file's ctime then: any write to it since (by anyone) changes it.
    struct timespec verified_ctime = {};
    // Whether every chunk was also found where a whole file has it, which a
    // verification by writing leaves to the first OpenWholeFile.
    bool verified_in_place = false;
  };

  // Where a reserved chunk goes.
  struct Placement {
    std::shared_ptr<DataFile> file;
    uint32_t directory = 0;
    uint64_t offset = 0;
    bool unmark_synced = false;
    uint64_t generation = 0;  // The file's generation with this write.
  };

  VersionState StateLocked(uint64_t dataset_version) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The usage of every file, or of those with no write in progress.
  std::vector<FileUsage> UsageLocked(bool only_idle) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes `bytes` off the version's live bytes, forgetting it at zero.
  void ForgetVersionBytesLocked(uint64_t dataset_version, uint64_t bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Frees room for `bytes` more under the capacity; false when the policy
  // declines.
  absl::StatusOr<bool> MakeRoomLocked(uint64_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Reserves `bytes` at `offset` of the source file's data file (creating it
  // as needed); nullopt when the policy declines.
  absl::StatusOr<std::optional<Placement>> ReserveLocked(const SourceFile& source,
                                                         uint32_t chunk_size, uint64_t offset,
                                                         uint64_t bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The source file's data file, created for chunks of `chunk_size` if
  // there is none.
  absl::StatusOr<CachedFile*> DataFileOfLocked(const SourceFile& source, uint32_t chunk_size)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // True when the source file has a data file. Otherwise creates one with
  // mu_ released (creating a file costs the file system tens of µs, which
  // every other caller of the store would wait out), or waits for the
  // inserter creating it, and returns false: the caller looks again at what
  // changed meanwhile.
  absl::StatusOr<bool> HasDataFileLocked(const SourceFile& source, uint32_t chunk_size)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A new data file in the cache directory holding the fewest bytes: with
  // O_DIRECT only when asked and every chunk starts on a block.
  struct NewDataFile {
    uint32_t directory = 0;
    uint64_t id = 0;
    bool direct_io = false;
  };
  NewDataFile NewDataFileLocked(uint32_t chunk_size) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<std::unique_ptr<DataFile>> CreateDataFile(const NewDataFile& file);
  CachedFile& AddDataFileLocked(const SourceFile& source, uint32_t directory,
                                std::unique_ptr<DataFile> data_file)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status ReclaimLocked(uint64_t file_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops `key` if the index still maps it to `location`.
  void DropLocked(std::string_view key, const v1::ChunkLocation& location)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Remembers that `source` was withdrawn, for WithdrawnSince.
  void WithdrawLocked(const SourceFile& source) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Reclaims `file` if it has no write in flight and holds no live chunk.
  void ReclaimIfDeadLocked(const CachedFile& file) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Hands the file to the syncer once it is idle and written since.
  void MaybeSyncLocked(CachedFile& file) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status MarkSyncedLocked(const std::vector<DataFileSyncer::SyncedFile>& synced)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Writes `data` at `offset` of O_DIRECT descriptor `fd` from an aligned
  // buffer, zero-padded to `disk_bytes` (a multiple of kBlockBytes).
  absl::Status WriteAligned(int fd, uint64_t offset, std::string_view data, uint64_t disk_bytes);
  // Writes the whole blocks at the start of `data` (to go at `offset` of
  // `file`) with O_DIRECT and returns how many bytes that was: 0 when
  // direct writes are off, `offset` is not on a block, they come to less
  // than direct_write_min_bytes, or the filesystem refuses O_DIRECT.
  absl::StatusOr<uint64_t> WriteBlocksDirect(const DataFile& file, uint64_t offset,
                                             std::string_view data);
  // Writes the chunk and, when it can stat the file, sets `*ctime_after` to
  // its ctime after the write, which any later write changes.
  absl::Status WriteChunk(DataFile& file, uint64_t offset, std::string_view data,
                          std::optional<struct timespec>* ctime_after);
  // The chunk's bytes; DATA_LOSS when they do not match its checksum.
  absl::StatusOr<std::string> ReadVerified(DataFile& file, const v1::ChunkLocation& location);
  // Reads the chunk into `out` (location.length() bytes) and verifies it.
  absl::Status ReadVerifiedInto(DataFile& file, const v1::ChunkLocation& location, char* out);
  // Checks the chunk's whole XXH3 and, when it has them, its block checksums.
  absl::Status VerifyChunk(DataFile& file, const v1::ChunkLocation& location, std::string& scratch);
  // Bytes [offset, offset + length) of the chunk, which the caller checked lie
  // inside it; DATA_LOSS when a block covering them does not match.
  absl::StatusOr<std::string> ReadRangeVerified(DataFile& file, const v1::ChunkLocation& location,
                                                uint64_t offset, uint64_t length);
  struct ByteRange {
    uint64_t offset = 0;
    uint64_t length = 0;
  };
  struct Found {
    v1::ChunkLocation location;
    std::shared_ptr<DataFile> file;
  };
  // The index entry of the chunk and its data file, which counts as used;
  // nullopt on a miss.
  absl::StatusOr<std::optional<Found>> Find(std::string_view encoded_key);
  // Read() (no range) and ReadRange(): the lookup, the verified read, and
  // dropping an entry that does not verify.
  absl::StatusOr<std::string> ReadChunk(const ChunkKey& key, std::optional<ByteRange> range);

  const StoreOptions options_;
  const std::unique_ptr<ChunkIndex> index_;
  const std::unique_ptr<IoEngine> io_;
  AlignedBufferPool buffers_{kIdleBufferBytes};
  // Before the data files, whose destructors tell it they are gone.
  DescriptorCache descriptors_;

  Mutex mu_;
  CondVar insert_done_;
  std::map<uint64_t, CachedFile> files_ ABSL_GUARDED_BY(mu_);  // By data file id.
  // → data file id.
  absl::flat_hash_map<SourceFile, uint64_t> files_by_source_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, VersionState> version_states_ ABSL_GUARDED_BY(mu_);  // Absent: kInactive.
  std::map<uint64_t, uint64_t> version_bytes_ ABSL_GUARDED_BY(mu_);       // Live bytes per version.
  absl::flat_hash_set<std::string> inserting_ ABSL_GUARDED_BY(mu_);       // Keys being written.
  // Source files whose data file is being created.
  absl::flat_hash_set<SourceFile> creating_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> directory_bytes_ ABSL_GUARDED_BY(mu_);
  const uint64_t eviction_slack_bytes_;
  uint64_t disk_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t used_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t chunk_count_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_file_id_ ABSL_GUARDED_BY(mu_) = 1;
  // Withdrawn files, newest last, numbered from withdrawn_first_; numbers
  // start at the store's opening time in ns, so that those of an earlier
  // opening are recognised as not its own.
  std::deque<SourceFile> withdrawn_ ABSL_GUARDED_BY(mu_);
  uint64_t withdrawn_first_ ABSL_GUARDED_BY(mu_) = 0;

  std::atomic<uint64_t> hits_{0};
  std::atomic<uint64_t> misses_{0};
  std::atomic<uint64_t> checksum_failures_{0};
  std::atomic<uint64_t> inserts_{0};
  std::atomic<uint64_t> admissions_refused_{0};
  std::atomic<uint64_t> insert_errors_{0};
  std::atomic<uint64_t> evicted_chunks_{0};
  std::atomic<uint64_t> read_bytes_{0};
  std::atomic<uint64_t> whole_files_{0};
  std::atomic<uint64_t> whole_files_ahead_{0};

  // Last, so that its thread stops before anything it uses is destroyed.
  DataFileSyncer syncer_;
};

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
    const SourceFile& source, uint32_t chunk_size, uint64_t offset, uint64_t bytes) {
  auto existing = files_by_source_.find(source);
  const bool counted = existing != files_by_source_.end() &&
                       files_.at(existing->second).unindexed_offsets.erase(offset) > 0;
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
  ForgetVersionBytesLocked(file.source.first, file.live_bytes);
  WithdrawLocked(file.source);
  files_by_source_.erase(file.source);
  files_.erase(file_id);
  return absl::OkStatus();
}

void DataFileChunkStore::WithdrawLocked(const SourceFile& source) {
  constexpr size_t kRememberedWithdrawals = 4096;
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
  file.written_here = false;  // Its chunks are read back from now on.
  file.live_bytes -= location.length();
  file.live_chunks--;
  used_bytes_ -= location.length();
  chunk_count_--;
  ForgetVersionBytesLocked(file.source.first, location.length());
  if (file.live_chunks > 0 || file.pending_writes > 0) {
    WithdrawLocked(file.source);  // No longer whole; reclaiming withdraws it too.
    file.unindexed_offsets.insert(location.offset());
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
  if (offset == 0 && length == location.length()) return ReadVerified(file, location);
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
  scratch.resize(location.length());
  GRANARY_RETURN_IF_ERROR(ReadVerifiedInto(file, location, scratch.data()));
  if (location.block_xxh3_size() == 0) return absl::OkStatus();
  GRANARY_RETURN_IF_ERROR(CheckBlockLayout(location, file));
  return CheckBlocks(location, file, 0, scratch.data(), location.length());
}

absl::StatusOr<ChunkStore::Extent> DataFileChunkStore::Locate(const ChunkKey& key) {
  GRANARY_ASSIGN_OR_RETURN(std::optional<Found> found, Find(key.Encode()));
  // Opened by path, not dup()ed: the store's own descriptor may be O_DIRECT
  // and is writable. A file unlinked since the lookup is a miss.
  UniqueFd fd(found ? ::open(found->file->path().c_str(), O_RDONLY | O_CLOEXEC) : -1);
  if (!fd.valid()) {
    misses_++;
    return NotCached(key);
  }
  hits_++;
  return Extent{std::move(fd), std::move(found->location)};
}

absl::StatusOr<ChunkStore::WholeFile> DataFileChunkStore::OpenWholeFile(uint64_t dataset_version,
                                                                        uint64_t file_id,
                                                                        uint64_t size,
                                                                        uint32_t chunk_size,
                                                                        WholeFileUse use) {
  const SourceFile source{dataset_version, file_id};
  auto not_whole = [&](std::string_view why) {
    return absl::NotFoundError(absl::StrCat("file ", file_id, " of version ",
                                            absl::Hex(dataset_version, absl::kZeroPad16),
                                            " is not held whole: ", AsAbsl(why)));
  };
  if (size == 0 || chunk_size == 0) return not_whole("it is empty");
  const uint64_t chunk_count = ChunkCount(size, chunk_size);
  std::shared_ptr<DataFile> data_file;
  uint64_t generation = 0;
  bool verified = false;
  bool in_place = false;
  struct timespec verified_ctime = {};
  {
    MutexLock lock(&mu_);
    auto it = files_by_source_.find(source);
    if (it == files_by_source_.end()) return not_whole("no chunk of it is cached");
    CachedFile& file = files_.at(it->second);
    if (file.live_chunks != chunk_count || file.pending_writes > 0) {
      return not_whole(
          absl::StrCat(file.live_chunks, " of its ", chunk_count, " chunks are cached"));
    }
    if (file.file->direct_io()) return not_whole("its data file is padded for O_DIRECT");
    if (use == WholeFileUse::kReadNow) file.last_use_ms = NowUnixMs();
    data_file = file.file;
    generation = file.generation;
    verified = file.verified_generation == generation;
    in_place = file.verified_in_place;
    verified_ctime = file.verified_ctime;
  }
  GRANARY_ASSIGN_OR_RETURN(struct stat st, data_file->Stat());
  if (static_cast<uint64_t>(st.st_size) != size) {
    return not_whole(absl::StrCat("its data file has ", st.st_size, " bytes, not ", size));
  }
  // Bytes written into the file behind the store's back (a damaged disk
  // being repaired, a stray writer) change its ctime: verified again.
  verified = verified && SameTime(st.st_ctim, verified_ctime);
  if (!verified && use == WholeFileUse::kAhead) return not_whole("it is not verified yet");
  if (!verified || !in_place) {
    std::string scratch;
    for (uint64_t index = 0; index < chunk_count; ++index) {
      const ChunkKey key{dataset_version, file_id, static_cast<uint32_t>(index)};
      const std::string encoded = key.Encode();
      GRANARY_ASSIGN_OR_RETURN(std::optional<v1::ChunkLocation> location, index_->Get(encoded));
      const bool chunk_in_place = location && location->data_file_id() == data_file->id() &&
                                  location->offset() == index * chunk_size &&
                                  location->length() == ChunkLength(size, chunk_size, index);
      if (!chunk_in_place) return not_whole(absl::StrCat("chunk ", index, " is not in place"));
      if (verified) continue;
      if (absl::Status checked = VerifyChunk(*data_file, *location, scratch); !checked.ok()) {
        if (checked.code() == absl::StatusCode::kDataLoss) checksum_failures_++;
        GRANARY_LOG_FIRST_N(WARNING, 20)
            << "chunk store: dropping " << key.ToString() << ": " << checked.message();
        MutexLock lock(&mu_);
        DropLocked(encoded, *location);
        return not_whole(std::string(checked.message()));
      }
    }
    MutexLock lock(&mu_);
    auto it = files_.find(data_file->id());
    if (it == files_.end() || it->second.generation != generation) {
      return not_whole("it changed while it was being verified");
    }
    it->second.verified_generation = generation;
    it->second.verified_ctime = st.st_ctim;
    it->second.verified_in_place = true;
  }
  UniqueFd fd(::open(data_file->path().c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return not_whole("its data file has just been evicted");
  if (use == WholeFileUse::kAhead) {
    whole_files_ahead_++;
  } else {
    hits_ += chunk_count;
    whole_files_++;
  }
  return WholeFile{.fd = std::move(fd),
                   .verified_ctime_ns = st.st_ctim.tv_sec * 1000000000 + st.st_ctim.tv_nsec};
}

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

void DataFileChunkStore::RecordUse(uint64_t dataset_version, uint64_t file_id, uint64_t chunks) {
  hits_ += chunks;
  MutexLock lock(&mu_);
  auto it = files_by_source_.find({dataset_version, file_id});
  if (it != files_by_source_.end()) files_.at(it->second).last_use_ms = NowUnixMs();
}

ChunkStore::Withdrawn DataFileChunkStore::WithdrawnSince(uint64_t after) {
  // Bounded, so that an answer fits in one local read message.
  constexpr size_t kMaxListed = 2048;
  Withdrawn answer;
  MutexLock lock(&mu_);
  const uint64_t last = withdrawn_first_ + withdrawn_.size() - 1;
  if (after + 1 < withdrawn_first_ || after > last) {
    answer.through = last;
    return answer;
  }
  answer.complete = true;
  answer.through = std::min<uint64_t>(last, after + kMaxListed);
  for (uint64_t number = after + 1; number <= answer.through; ++number) {
    answer.files.push_back(withdrawn_[number - withdrawn_first_]);
  }
  return answer;
}

bool DataFileChunkStore::Contains(const ChunkKey& key) {
  auto location = index_->Get(key.Encode());
  return location.ok() && location->has_value();
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
      const uint64_t stored =
          data_file->direct_io() ? RoundUpToBlock(location.length()) : location.length();
      end = std::max(end, location.offset() + stored);
      file.disk_bytes += RoundUpToBlock(location.length());
      file.live_bytes += location.length();
      file.live_chunks++;
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

}  // namespace

absl::StatusOr<std::unique_ptr<ChunkStore>> ChunkStore::Open(const StoreOptions& options) {
  GRANARY_RETURN_IF_ERROR(ValidateOptions(options));
  for (const std::string& directory : options.directories) {
    GRANARY_RETURN_IF_ERROR(PrepareDirectory(directory));
  }
  GRANARY_ASSIGN_OR_RETURN(std::unique_ptr<ChunkIndex> index, ChunkIndex::Open(options.index_path));
  auto store = std::make_unique<DataFileChunkStore>(
      options, std::move(index), IoEngine::Create(options.use_io_uring, options.queue_depth));
  GRANARY_RETURN_IF_ERROR(store->Recover());
  return store;
}

}  // namespace granary::store
