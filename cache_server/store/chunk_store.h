// ChunkStore holds chunks (ChunkKey → up to 64 MiB of bytes) on a node's NVMe.
//
// Layout: one data file per source file of a dataset version (data_file.h),
// holding the chunks of it that the node has at their offsets in the source
// file, spread over one or more cache directories; and a RocksDB index
// mapping the encoded ChunkKey to its v1::ChunkLocation (data file, offset,
// length, XXH3, dataset version, last use, and an XXH3 per checksum block).
// A file the node holds completely is therefore the source file byte for
// byte, which the kernel can serve itself (OpenWholeFile).
//
// Contract:
//  - Every byte returned is verified: Read() checks the chunk's XXH3,
//    ReadRange() reads only the checksum blocks covering its range and checks
//    each one's XXH3, OpenWholeFile() hands out a file only once every chunk
//    of it has been read and checked since it was last written and since the
//    store was opened. A mismatch is a miss: the entry is dropped and counted,
//    and wrong bytes are never returned. Entries stored before blocks were
//    checksummed (no block checksums in their index entry) are read and
//    verified whole by ReadRange() too, so a store written by an older
//    granaryd keeps serving its chunks; they age out through eviction.
//  - Bytes of data files on disk never exceed the configured capacity
//    (a descriptor handed out by Locate or OpenWholeFile keeps an evicted
//    file's blocks until it is closed). Space is reclaimed a whole data file
//    at a time, with no compaction: every data file holds chunks of one
//    dataset version only, so it has one version state and one last use
//    (eviction_policy.h).
//  - Eviction is dataset-aware: inactive versions go first, least recently used
//    first; pinned and held versions are never evicted; when the store is full of active
//    data, a new chunk of an active version is not admitted in place of another
//    active chunk (so epoch-style random access does not thrash). A version is
//    inactive until SetVersionState says otherwise; the state persists.
//  - A chunk is held whole (Insert) or in part (InsertBlocks: the checksum
//    blocks a reader asked for). A chunk held in part is checksummed in
//    blocks of its own, smaller than a whole chunk's (4 KiB for chunks up to
//    4 MiB: StoreOptions::partial_block_bytes), so that what a reader's miss
//    fetches, verifies and keeps is its range rounded out to disk blocks,
//    not to 64 KiB; completing it checksums the chunk in whole-chunk blocks
//    again. A chunk held in part serves ReadRange()
//    inside its blocks and is absent to Read(), Locate(), Contains() and
//    OpenWholeFile(), so only whole, verified files reach the kernel; its
//    blocks count as the bytes they take; Insert() of the whole chunk
//    completes it in place.
//  - After a crash at any moment, reopening yields an index that points only at
//    complete chunks, or blocks of chunks, whose checksums verify: bytes are
//    written before their index entry, and data files not yet synced are
//    verified on open (data_file_chunk_store.h explains why this needs no
//    fsync per chunk).
//
// Thread-safety: all methods are safe to call concurrently. Reads of different
// chunks, and the I/O of inserts, run in parallel.
#ifndef GRANARY_CACHE_SERVER_STORE_CHUNK_STORE_H_
#define GRANARY_CACHE_SERVER_STORE_CHUNK_STORE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cache_server/store/held_blocks.h"
#include "cache_server/store/store_events.h"
#include "common/base/unique_fd.h"
#include "common/dataset/chunk_key.h"
#include "proto/granary.pb.h"

namespace granary::store {

// Why a file is asked for whole (ChunkStore::OpenWholeFile): to be read
// now, or ahead of an open a reader expects, which is neither verified (a
// file not verified yet is refused) nor counted as a use (the reader reports
// the open when it comes).
enum class WholeFileUse { kReadNow, kAhead };

// How space is found for a new chunk when the store is full.
enum class EvictionMode {
  // Inactive versions first, least recently used first; pinned never; a chunk
  // of an active version is not admitted in place of another active chunk.
  kDatasetAware,
  // Plain least-recently-used over everything but pinned and held versions. Thrashes
  // under epoch-style access; kept to measure against and for tests.
  kLru,
};

struct StoreOptions {
  // Cache directories (one per NVMe drive); created if missing.
  std::vector<std::string> directories;
  // RocksDB index directory; created if missing.
  std::string index_path;
  // Hard bound on bytes held in data files, over all directories.
  uint64_t capacity_bytes = 0;
  // io_uring queue depth; a pread fallback is used where io_uring is forbidden.
  unsigned queue_depth = 64;
  bool use_io_uring = true;
  // Largest chunk Insert() accepts. Open() fails when the capacity is smaller.
  uint64_t max_chunk_bytes = 64ull << 20;
  // Read and write data files with O_DIRECT, bypassing the page cache, where
  // the filesystem supports it and chunks are 4 KiB-aligned. A file's last
  // chunk is then padded to a whole block, so such files are never handed
  // to the kernel whole (OpenWholeFile).
  bool direct_io = false;
  // With direct_io off: write each chunk's whole 4 KiB blocks with O_DIRECT
  // where the filesystem supports it and they come to direct_write_min_bytes
  // or more, and the rest (a file's last partial block, small chunks) through
  // the page cache. Reads stay buffered and files stay exact (they can be
  // handed out whole). Storing large chunks then costs no page cache pages,
  // nor the CPU of writing them back.
  bool direct_writes = true;
  // Below this, a write's fixed costs with O_DIRECT (a descriptor of its own,
  // the block allocation done in the write) outweigh the page cache pages it
  // saves (bench/store/new_file_writes.py measures where they cross).
  uint64_t direct_write_min_bytes = 1 << 20;
  EvictionMode eviction = EvictionMode::kDatasetAware;
  // Bytes covered by one block checksum in the index entries of new chunks;
  // a multiple of 4 KiB, so that every block can be read with O_DIRECT. A
  // ranged read reads and hashes the whole blocks around its range, and each
  // block adds 8 bytes to the index entry that every read looks up. Blocks
  // as large as a typical read double the bytes an unaligned read hashes;
  // 64 KiB keeps an unaligned 128 KiB read at 1.5x its bytes and the entry
  // of a 4 MiB chunk at 512 bytes.
  uint64_t checksum_block_bytes = 64 << 10;
  // Bytes covered by one block checksum in chunks held in part
  // (InsertBlocks): the unit a reader's miss fetches from the source and
  // verifies, so the source reads about what readers ask for (an unaligned
  // 64 KiB read costs 68 KiB in 4 KiB blocks, 128 KiB in 64 KiB ones). A
  // multiple of 4 KiB, raised for large chunks (PartialBlockBytes) so that a
  // partial entry lists at most 1,024 checksums (8 KiB).
  uint64_t partial_block_bytes = 4 << 10;
  // Data files kept open when idle (one per cached source file, so not all
  // can be); 0 means a quarter of the process's open-file limit
  // (RLIMIT_NOFILE), leaving the rest to sockets, source files and the index.
  size_t max_open_data_files = 0;
  // Told what the store comes to hold and stops holding; none when null.
  // Must outlive the store.
  StoreEvents* events = nullptr;
};

// Values are stored in the index: keep them.
enum class VersionState {
  kInactive = 0,  // No running job reads it: evicted first.
  kActive = 1,    // A job reads or prewarms it.
  kPinned = 2,    // Never evicted.
  // Held for a job that waits or runs: never evicted, under either mode, and
  // otherwise active. Holds are leases, placed again after a restart, so it
  // is stored as kActive.
  kHeld = 3,
};

struct StoreStats {
  uint64_t capacity_bytes = 0;
  uint64_t used_bytes = 0;      // Bytes of live chunks.
  uint64_t disk_bytes = 0;      // Blocks of data files on disk (≤ capacity_bytes).
  uint64_t chunk_count = 0;     // Chunks held, whole or in part.
  uint64_t partial_chunks = 0;  // Chunks held in part.
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t checksum_failures = 0;
  uint64_t inserts = 0;
  uint64_t admissions_refused = 0;
  uint64_t insert_errors = 0;  // Inserts that failed (a full disk, an I/O error).
  uint64_t evicted_chunks = 0;
  uint64_t read_bytes = 0;         // Bytes read from data files (reads, and checks on open).
  uint64_t whole_files = 0;        // Files handed out whole to be read (OpenWholeFile).
  uint64_t whole_files_ahead = 0;  // Files handed out whole ahead of their opens.
  std::string io_engine;           // "io_uring" or "pread".
};

class ChunkStore {
 public:
  // Fails with a status naming the directory when one is missing and cannot be
  // created, is not writable, or the capacity is smaller than one maximal chunk.
  static absl::StatusOr<std::unique_ptr<ChunkStore>> Open(const StoreOptions& options);

  virtual ~ChunkStore() = default;

  // The chunk's verified bytes, or NOT_FOUND on a miss (absent, or dropped
  // because its checksum did not verify or its data file could not be read).
  // Other errors only when the index itself fails.
  virtual absl::StatusOr<std::string> Read(const ChunkKey& key) = 0;

  // Bytes [offset, offset + length) of the chunk, verified block by block:
  // only the checksum blocks covering the range are read. NOT_FOUND on a miss
  // as Read(); OUT_OF_RANGE, naming the chunk and its length, when the range
  // ends past the chunk's end.
  virtual absl::StatusOr<std::string> ReadRange(const ChunkKey& key, uint64_t offset,
                                                uint64_t length) = 0;

  // Where the chunk lies, for a reader on this host that reads and verifies
  // it itself (common/net/local_read_socket.h): `fd`, a new read-only buffered
  // descriptor of its data file, and its location (offset, length,
  // checksums). Counts as a hit. NOT_FOUND on a miss, or when the file has
  // just been reclaimed.
  struct Extent {
    UniqueFd fd;
    v1::ChunkLocation location;
  };
  virtual absl::StatusOr<Extent> Locate(const ChunkKey& key) = 0;

  // A read-only descriptor of the data file of file `file_id` of
  // `dataset_version` when it is that source file whole: `size` bytes in
  // chunks of `chunk_size`, every chunk held, all verified since they were
  // last written (by the store, or by anyone: a write changes the file's
  // ctime) and since the store was opened (verifying them first if
  // needed). Counts as a hit of every chunk and a use of the file, unless
  // asked kAhead. NOT_FOUND when a chunk is missing or does not verify (it
  // is dropped), when the file is empty or was written with O_DIRECT
  // padding, and, asked kAhead, when it would have to be verified first.
  struct WholeFile {
    UniqueFd fd;
    // The data file's ctime when it was verified: a holder of `fd` knows
    // nothing was written to it since while it still has this ctime.
    int64_t verified_ctime_ns = 0;
  };
  virtual absl::StatusOr<WholeFile> OpenWholeFile(uint64_t dataset_version, uint64_t file_id,
                                                  uint64_t size, uint32_t chunk_size,
                                                  WholeFileUse use) = 0;

  // Counts a use of the data file of file `file_id` of `dataset_version`
  // by a reader that read `chunks` of its chunks through a descriptor it
  // kept (from Locate or OpenWholeFile): hits, and the file's last use.
  virtual void RecordUse(uint64_t dataset_version, uint64_t file_id, uint64_t chunks) = 0;

  // The files withdrawn (reclaimed, or a chunk of them dropped) after
  // sequence number `after`, oldest first, for readers that keep
  // descriptors: `through` is the sequence number of the last one listed;
  // `complete` is false when the store no longer remembers them all, or
  // `after` is not one of its own numbers (it was reopened since).
  struct Withdrawn {
    std::vector<std::pair<uint64_t, uint64_t>> files;  // (dataset version, file id).
    uint64_t through = 0;
    bool complete = false;
  };
  virtual Withdrawn WithdrawnSince(uint64_t after) = 0;

  // Whether the index holds `key` whole (without reading or verifying it).
  virtual bool Contains(const ChunkKey& key) = 0;

  // The bytes of chunk `key` the index holds, as ranges of the chunk in
  // order: [0, length) when whole, none when not held (without reading or
  // verifying them: a read may still find one damaged, or dropped since).
  virtual std::vector<HeldExtent> HeldExtentsOf(const ChunkKey& key) = 0;

  // Stores `data` under `key`, at key.chunk_index × `chunk_size` (the chunk
  // size of its dataset version) in its file's data file, completing the
  // chunk if it was held in part. Returns true if stored (or already held
  // whole), false if the admission rule declined it.
  // INVALID_ARGUMENT for a chunk over max_chunk_bytes or over `chunk_size`;
  // RESOURCE_EXHAUSTED when the disk itself is full. A second insert of a key
  // being inserted waits for the first.
  virtual absl::StatusOr<bool> Insert(const ChunkKey& key, uint32_t chunk_size,
                                      std::string_view data) = 0;

  // Stores `data`, bytes [offset, offset + data.size()) of chunk `key`
  // (`chunk_length` bytes whole, of a version with chunks of `chunk_size`),
  // at their place in its file's data file, and holds the chunk in part
  // with those blocks added: `offset` must start a block of
  // partial_block_bytes(chunk_size) and the bytes must end at the end of one
  // or of the chunk (INVALID_ARGUMENT otherwise). Returns true if stored (or held already, whole or
  // those blocks), false if the admission rule declined them. Errors as Insert().
  virtual absl::StatusOr<bool> InsertBlocks(const ChunkKey& key, uint32_t chunk_size,
                                            uint32_t chunk_length, uint64_t offset,
                                            std::string_view data) = 0;

  // Bytes covered by one block checksum of a chunk held in part, of a
  // version with chunks of `chunk_size`: what InsertBlocks() takes in whole.
  virtual uint64_t partial_block_bytes(uint32_t chunk_size) const = 0;

  virtual void SetVersionState(uint64_t dataset_version, VersionState state) = 0;
  // What SetVersionState last made `dataset_version`; kInactive if nothing.
  virtual VersionState GetVersionState(uint64_t dataset_version) = 0;

  // Drops every chunk of `dataset_version` and forgets its state; returns the
  // chunk bytes freed. Chunks inserted while it runs may survive it.
  virtual absl::StatusOr<uint64_t> RemoveVersion(uint64_t dataset_version) = 0;

  // Bytes of `dataset_version` held by this store (of chunks held in part,
  // their blocks).
  virtual uint64_t CachedBytes(uint64_t dataset_version) = 0;

  // The keys of every chunk of `dataset_version` held whole or in part, in
  // key order.
  virtual std::vector<ChunkKey> ChunksOf(uint64_t dataset_version) = 0;

  virtual StoreStats Stats() = 0;
};

}  // namespace granary::store

#endif  // GRANARY_CACHE_SERVER_STORE_CHUNK_STORE_H_
