// DataFileChunkStore is the data-file implementation of ChunkStore
// (chunk_store.h), which ChunkStore::Open() makes; its parts live in
// chunk_store_reads.cc, chunk_store_writes.cc, chunk_store_whole_files.cc,
// chunk_store_space.cc (placement, capacity, eviction, syncing) and
// chunk_store_recovery.cc.
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
// Chunks held in part: a reader's miss of part of a chunk may fetch only the
// checksum blocks it covers (InsertBlocks). They are written where the whole
// chunk would be, so the data file stays the source file's image with holes;
// the chunk's entry lists the blocks held, each with its own XXH3, and is
// rewritten, with more blocks, by each later insert of blocks (inserts of
// one key run one at a time, and merge into the entry the index holds when
// they finish, so a block dropped meanwhile is not brought back). An insert
// of the whole chunk rewrites its bytes and replaces the entry with a whole
// one. Counted: the held blocks' bytes are live bytes, each extent of
// adjacent held blocks takes its whole 4 KiB blocks of disk, reserved before
// it is written like a chunk's. Verified: ranged reads check each block
// they read; reads of a whole chunk, Locate and whole files see only whole
// entries, so a file holding a partial chunk is never handed out whole.
// Recovered: a partial entry of an unsynced file has its held blocks
// verified on open, and the bytes between held extents (blocks written by
// an insert a crash cut short) are punched out like other unindexed bytes.
// Evicted: with their data file, as every chunk is.
//
// Thread-safety: every public method may be called concurrently. One mutex
// guards the in-memory bookkeeping and orders every index mutation; file I/O,
// checksumming and fdatasync run outside it. A read holds
// the data file's descriptor (DescriptorCache) while it runs, so neither
// reclaiming the file nor closing idle descriptors pulls one out from under
// it; a file reclaimed before its read reopened it is a miss.
#ifndef GRANARY_CACHE_SERVER_STORE_DATA_FILE_CHUNK_STORE_H_
#define GRANARY_CACHE_SERVER_STORE_DATA_FILE_CHUNK_STORE_H_

#include <sys/stat.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cache_server/store/aligned_buffer.h"
#include "cache_server/store/chunk_index.h"
#include "cache_server/store/chunk_store.h"
#include "cache_server/store/data_file.h"
#include "cache_server/store/data_file_syncer.h"
#include "cache_server/store/descriptor_cache.h"
#include "cache_server/store/eviction_policy.h"
#include "cache_server/store/io_engine.h"
#include "common/base/mutex.h"
#include "common/dataset/chunk_key.h"
#include "proto/granary.pb.h"

namespace granary::store {

class DataFileChunkStore final : public ChunkStore {
 public:
  DataFileChunkStore(const StoreOptions& options, std::unique_ptr<ChunkIndex> index,
                     std::unique_ptr<IoEngine> io);

  // Rebuilds the bookkeeping from the index and the data files, repairing
  // what a crash left behind (see the top of this header).
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
  std::vector<HeldExtent> HeldExtentsOf(const ChunkKey& key) override;
  absl::StatusOr<bool> Insert(const ChunkKey& key, uint32_t chunk_size,
                              std::string_view data) override;
  absl::StatusOr<bool> InsertBlocks(const ChunkKey& key, uint32_t chunk_size, uint32_t chunk_length,
                                    uint64_t offset, std::string_view data) override;
  uint64_t partial_block_bytes(uint32_t chunk_size) const override;
  void SetVersionState(uint64_t dataset_version, VersionState state) override;
  VersionState GetVersionState(uint64_t dataset_version) override;
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
    uint64_t live_chunks = 0;     // Whole or in part.
    uint64_t partial_chunks = 0;  // In part.
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
  // Reserves `bytes` more for the chunk at `offset` of the source file's
  // data file (creating it as needed), to be written whole or in part;
  // nullopt when the policy declines.
  absl::StatusOr<std::optional<Placement>> ReserveLocked(const SourceFile& source,
                                                         uint32_t chunk_size, uint64_t offset,
                                                         uint64_t bytes, bool whole)
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

  // Insert() and InsertBlocks(): stores bytes [offset, offset + data.size())
  // of the chunk, `chunk_length` bytes whole; whole when they are all of it.
  absl::StatusOr<bool> Store(const ChunkKey& key, uint32_t chunk_size, uint32_t chunk_length,
                             uint64_t offset, std::string_view data);
  // Counts `location`, just put in the index, in place of `replaced` (the
  // entry it replaced, if any) in `file` and the store's totals.
  void CountPutLocked(CachedFile& file, const std::optional<v1::ChunkLocation>& replaced,
                      const v1::ChunkLocation& location) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

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
  // Checks the chunk's whole XXH3 and, when it has them, its block
  // checksums; of a chunk held in part, each held block's.
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
  // O_DIRECT staging buffers kept for reuse.
  static constexpr uint64_t kIdleBufferBytes = 128 << 20;
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
  uint64_t partial_chunks_ ABSL_GUARDED_BY(mu_) = 0;
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

}  // namespace granary::store

#endif  // GRANARY_CACHE_SERVER_STORE_DATA_FILE_CHUNK_STORE_H_
