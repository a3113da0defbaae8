// ReadThrough answers "the bytes of chunk K" on one node: from the chunk store
// when it holds K (verified by the store), else by fetching the whole chunk,
// storing it and returning it. A read of part of a chunk fetches only the
// checksum blocks covering it (aligned, in one read), answers, and stores
// them behind the answer (the store holds the chunk in part): a reader at
// random offsets costs the source about the bytes it asks for, and waits for
// one fetch alone. The rest of the chunk follows when a reader asks for it
// whole (a sequential reader), or a prewarm or the dataset's fill fetches it;
// a chunk held in part is read from the source only where it lacks blocks,
// so one the cache keeps in part (full of an active dataset, it declines the
// rest) costs each epoch only its missing bytes.
// A miss, of blocks or of the whole chunk, is fetched once per group: only a
// chunk's owner in a cache group reads it from the source, so a node that is
// not the owner (a replica, or a node a reader failed over to) first asks the
// owner for the same bytes, which reads the miss through itself. Failing
// that, the bytes are copied from a peer that holds them (where the chunk
// lived in this group before a membership change, or its owner in another
// group), so a joining node and a second group warm from their peers instead
// of reading the shared source again, while that is the faster way
// (fetch_speeds.h); else they are read from the dataset's source.
// Concurrent misses of one chunk share a single fetch, and concurrent misses
// of the same blocks of one a single fetch; misses that overlap in part (a
// reader's blocks, then the whole chunk once it reads on) read each byte
// from the source once (source_reads_in_flight.h). Every read marks its dataset
// version active for the store's eviction.
//
// A peer's copy is trusted as the peer verified it against the checksum it
// stored on its first fetch; this node checksums it again as it stores it.
//
// Keys are checked against their version's manifest first: an unknown version
// is NOT_FOUND, a file id or chunk index past the end is OUT_OF_RANGE, a key
// naming a directory or symlink is INVALID_ARGUMENT. Source errors keep their
// codes (FAILED_PRECONDITION for a file that changed since registration); a
// source file whose metadata alone changed reads, and is told to the
// metadata change listener (SourceChangeRefresher).
// Store failures never fail a read: the chunk is fetched from the source.
// Readers' misses read the sources before fills and prewarms do
// (source_turns.h): a reader's blocks never queue behind a fill's chunks.
//
// Thread-safety: all methods are safe to call concurrently.
#ifndef GRANARY_CACHE_SERVER_READ_PATH_READ_THROUGH_H_
#define GRANARY_CACHE_SERVER_READ_PATH_READ_THROUGH_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cache_server/access/sources.h"
#include "cache_server/catalog/catalog.h"
#include "cache_server/catalog/version_activity.h"
#include "cache_server/cluster/cluster_view.h"
#include "cache_server/metrics.h"
#include "cache_server/read_path/fetch_speeds.h"
#include "cache_server/read_path/source_journal.h"
#include "cache_server/read_path/source_reads_in_flight.h"
#include "cache_server/read_path/source_turns.h"
#include "cache_server/read_path/write_behind.h"
#include "cache_server/store/chunk_store.h"
#include "client/dataset_client.h"
#include "common/base/single_flight.h"
#include "common/base/unique_fd.h"
#include "common/dataset/chunk_key.h"
#include "common/dataset/manifest.h"
#include "common/net/local_read_socket.h"

namespace granary {

class ReadThrough {
 public:
  using ChunkData = std::shared_ptr<const std::string>;
  // What Read() answers: the bytes asked for, and what is known of the chunk
  // around them.
  struct RangeRead {
    ChunkData data;  // The bytes asked for: the whole chunk or a range of it.
    bool from_cache = false;
    uint32_t chunk_length = 0;  // Of the whole chunk.
    // The chunk's bytes from `whole_offset` on, to the end of the range at
    // least, when they were in memory (fetched, or waiting to be stored): the
    // rest of a range is served from them.
    ChunkData whole;
    uint32_t whole_offset = 0;
  };

  ReadThrough(Catalog* catalog, store::ChunkStore* store, ServerMetrics* metrics,
              VersionActivity* activity, ClusterView* cluster, WriteBehind* write_behind,
              Sources* sources);

  // Bytes [offset, offset + length) of chunk `key`: length 0 reads to the
  // chunk's end, a range ending past it is cut there, an offset past it is
  // OUT_OF_RANGE. A hit reads and verifies only the store's checksum blocks
  // covering the range; a miss fetches, stores and slices the whole chunk,
  // or the blocks covering the range (see the top of this header).
  // With kCacheOnly a chunk this node does not hold is
  // NOT_FOUND (how peers copy from each other without loops); with
  // kOwnerFetch a miss is never forwarded to the owner.
  absl::StatusOr<RangeRead> Read(const ChunkKey& key, uint32_t offset, uint32_t length,
                                 ChunkSourcing sourcing = ChunkSourcing::kReadThrough);

  // More of a read that Read() answered and counted already: bytes
  // [offset, offset + length) of chunk `key` (inside it), from the store, or
  // through Read() when the store no longer holds them. Adds to the bytes
  // served, not to the reads. Lets a long range be served piece by piece, so
  // that a slow reader holds one piece in memory, not the range.
  absl::StatusOr<ChunkData> ReadMore(const ChunkKey& key, uint32_t offset, uint32_t length,
                                     ChunkSourcing sourcing);

  // Where Serve() sends a range: Begin() once, with the range's length and
  // whether it came from the cache, then its bytes piece by piece. A false
  // return stops the read (the reader went away).
  class RangeSink {
   public:
    virtual ~RangeSink() = default;
    virtual bool Begin(uint64_t length, bool from_cache) = 0;
    virtual bool Write(std::string_view piece) = 0;
  };
  // Serves a read of bytes [offset, offset + length) of chunk `key` (as
  // Read() cuts it) to `sink`, at most `piece_bytes` at a time, so that a
  // slow reader holds one piece in memory, not the range; the first piece's
  // latency is observed as the read's. One read, counted once: a miss serves
  // every piece from the chunk it fetched, a hit reads the later pieces from
  // the store. Errors as Read(); CANCELLED when the sink stops.
  absl::Status Serve(const ChunkKey& key, uint32_t offset, uint32_t length, ChunkSourcing sourcing,
                     uint32_t piece_bytes, RangeSink& sink);

  // Where a cached chunk lies, for a reader on this host that reads it
  // itself (store::ChunkStore::Locate); counted as a hit serving `read_bytes`,
  // unless that is 0 (a prefetch). NOT_FOUND on a miss, which is not read
  // through: the reader reads it with Read() over gRPC.
  absl::StatusOr<store::ChunkStore::Extent> Locate(const ChunkKey& key, uint64_t read_bytes);

  using WholeFile = LocalWholeFile;

  // A descriptor of the cache's whole, verified copy of the file `file`
  // names (its version and file id), `size` bytes in chunks of `chunk_size`,
  // for the kernel to serve (store::ChunkStore::OpenWholeFile); counted as a
  // hit of every chunk serving the whole file. A file this node does not
  // hold whole is treated as `fetch` says (common/net/local_read_socket.h; an
  // in-memory copy is common/base/memory_file.h's, its fetched chunks stored behind the
  // answer, so that the open waits for the fetch, not for the store);
  // fetching, INVALID_ARGUMENT when `size` or `chunk_size` is not the
  // manifest's, and the fetch's own errors.
  absl::StatusOr<WholeFile> OpenWholeFile(const ChunkKey& file, uint64_t size, uint32_t chunk_size,
                                          WholeFileFetch fetch);

  // A file of a batch of whole files: its version and id (chunk index 0),
  // and its size.
  struct WholeFileAsk {
    ChunkKey file;
    uint64_t size = 0;
  };
  // Fetches, for a batch of whole files of one version (chunks of
  // `chunk_size`) that this node does not hold, those of one chunk whose
  // owner is another member of the group: each owner is asked for all of its
  // files at once (its reads sent back to back on one connection; the owners
  // in parallel), and each file is stored before this returns and counted as
  // a reader's miss copied from a peer. Returns, per ask, the fetched bytes,
  // or null for a file not fetched here (several chunks, owned by this node,
  // an owner suspected or failing): OpenWholeFile() fetches those its own
  // way. Unlike Fetch(), fetches of one chunk by two batches at once are not
  // merged: the chunk crosses the network twice, but its owner reads the
  // source once.
  std::vector<ChunkData> FetchFromOwners(std::span<const WholeFileAsk> asks, uint32_t chunk_size);

  // Opens file `file` (`size` bytes, one chunk of `chunk_size`), whose bytes
  // FetchFromOwners() fetched: the store's copy; NOT_FOUND when the store did
  // not keep it. Counted by the fetch, not again here.
  absl::StatusOr<WholeFile> OpenFetched(const ChunkKey& file, uint64_t size, uint32_t chunk_size);
  // A sealed in-memory copy of a file's fetched bytes `data`, for a reader
  // when the store did not keep them.
  static absl::StatusOr<WholeFile> InMemoryCopy(std::string_view data);

  // The cache's copy of file `file`, `size` bytes in chunks of `chunk_size`,
  // when it is held whole and already verified, for an open a reader
  // expects (store::WholeFileUse::kAhead): nothing is fetched, read or
  // counted. NOT_FOUND otherwise.
  absl::StatusOr<WholeFile> OpenHeldAhead(const ChunkKey& file, uint64_t size, uint32_t chunk_size);

  // Counts reads a reader on this host served itself from descriptors it
  // kept (Locate, OpenWholeFile) as hits and as uses of their versions and
  // files, and answers the files withdrawn since its last report.
  store::ChunkStore::Withdrawn RecordUses(const v1::UseReport& report);

  // How a fetched chunk reaches the store: before Fetch() returns (prewarms
  // and fills, whose progress means "cached"), or behind the answer, through
  // the write-behind queue (readers' misses).
  enum class Storing { kBeforeReturn, kBehind };

  // Fetches chunk `key` of `manifest` through its owner, from a peer or from
  // the source into the store, unless the store holds it already: a fill's
  // or prewarm's fetch, whose source reads take the turns readers leave.
  // Counts as a fetch, not as a chunk read.
  absl::StatusOr<ChunkData> Fetch(const Manifest& manifest, const ChunkKey& key,
                                  ChunkSourcing sourcing = ChunkSourcing::kReadThrough,
                                  Storing storing = Storing::kBeforeReturn);

  // Whether the node holds chunk `key`: stored, or fetched and waiting in the
  // write-behind queue to be stored.
  bool Holds(const ChunkKey& key);

  // Called with every miss a reader (or a peer asking this node as the
  // owner) makes, after it is answered; set before the first read.
  using MissListener = std::function<void(const std::shared_ptr<const Manifest>&, const ChunkKey&)>;
  void set_miss_listener(MissListener listener) { miss_listener_ = std::move(listener); }

  // Called with every source read that found its file's metadata alone
  // changed since its version's scan (the read is served). Set before the
  // first read.
  using MetadataChangeListener =
      std::function<void(const Manifest& version, std::string_view path)>;
  void set_metadata_change_listener(MetadataChangeListener listener) {
    metadata_change_listener_ = std::move(listener);
  }

  // Where every source read is written down (none when null); set before
  // the first read. Must outlive this object.
  void set_source_journal(SourceJournal* journal) { journal_ = journal; }

  // How many readers wait on misses now.
  int ReadersWaiting() const { return readers_waiting_.load(std::memory_order_relaxed); }
  // Whether a reader waits on a miss now or has within `window`.
  bool ReadersMissedWithin(std::chrono::steady_clock::duration window) const;

 private:
  // Read() of bytes [offset, offset + length) of chunk `key` that begin a
  // read of `read_length` bytes (0: to the chunk's end), whose blocks a miss
  // of part of the chunk fetches.
  absl::StatusOr<RangeRead> ReadStart(const ChunkKey& key, uint32_t offset, uint32_t length,
                                      uint32_t read_length, ChunkSourcing sourcing);
  // Bytes of a chunk and where they start in it.
  using Blocks = WriteBehind::Blocks;
  // Blocks [begin, end) of chunk `key`, as a reader's miss fetches them
  // with `sourcing`: what concurrent misses of the same blocks share (a miss
  // asked as the owner never waits on one that asks the owner).
  struct BlockRange {
    ChunkKey key;
    uint64_t begin = 0;
    uint64_t end = 0;
    ChunkSourcing sourcing = ChunkSourcing::kReadThrough;
    friend bool operator==(const BlockRange&, const BlockRange&) = default;
    template <typename H>
    friend H AbslHashValue(H h, const BlockRange& range) {
      return H::combine(std::move(h), range.key, range.begin, range.end, range.sourcing);
    }
  };
  // The blocks `range` of file `entry`'s chunk (`chunk_length` bytes): from
  // memory or the store when a flight just fetched them, else obtained
  // (Obtain) and stored behind the answer.
  absl::StatusOr<Blocks> FetchBlocksOnce(const Manifest& manifest, const ManifestEntry& entry,
                                         const BlockRange& range, uint32_t chunk_length);
  // A reader's miss of bytes [offset, end) of chunk `key` of file `entry`
  // (`chunk_length` bytes), part of the chunk: the blocks covering them,
  // obtained as `sourcing` allows (by one of the misses of the same blocks at
  // once), stored, and told to the miss listener; counted as a miss.
  absl::StatusOr<Blocks> FetchBlocksMiss(const std::shared_ptr<const Manifest>& manifest,
                                         const ManifestEntry& entry, const ChunkKey& key,
                                         uint64_t offset, uint64_t end, uint32_t chunk_length,
                                         ChunkSourcing sourcing);
  // A reader's miss of `key`: counted, fetched, and told to the miss listener.
  absl::StatusOr<ChunkData> FetchMiss(const std::shared_ptr<const Manifest>& manifest,
                                      const ChunkKey& key, ChunkSourcing sourcing, Storing storing);
  // Who a source read is for: a reader waiting on it, or a fill (prewarm).
  enum class SourceUse { kReader, kFill };
  // Fetch() for `use`.
  absl::StatusOr<ChunkData> FetchFor(const Manifest& manifest, const ChunkKey& key,
                                     ChunkSourcing sourcing, Storing storing, SourceUse use);
  absl::StatusOr<ChunkData> FetchOnce(const Manifest& manifest, const ChunkKey& key,
                                      ChunkSourcing sourcing, Storing storing, SourceUse use);
  // The manifest of `file`'s version, when `size` and `chunk_size` are its
  // entry's.
  absl::StatusOr<std::shared_ptr<const Manifest>> WholeFileManifest(const ChunkKey& file,
                                                                    uint64_t size,
                                                                    uint32_t chunk_size);
  // Fetches and stores the chunks of file `file` (`size` bytes in chunks of
  // `chunk_size`) that the store lacks; how much it fetched.
  struct Fetched {
    uint64_t chunks = 0;
    uint64_t bytes = 0;
  };
  absl::StatusOr<Fetched> FetchWhole(const ChunkKey& file, uint64_t size, uint32_t chunk_size);
  // FetchFromOwners() of the asks `which` of `asks`, all owned by `owner`.
  void FetchFromOwner(const Member& owner, const std::shared_ptr<const Manifest>& manifest,
                      std::span<const WholeFileAsk> asks, std::span<const size_t> which,
                      std::vector<ChunkData>& fetched);
  // The file's bytes in a sealed memory file: the chunks held, read and
  // verified from the store, the rest fetched as readers' misses are.
  absl::StatusOr<WholeFile> ReadWholeIntoMemory(const ChunkKey& file, uint64_t size,
                                                uint32_t chunk_size);
  // Bytes [offset, offset + length) of chunk `key` from its owner in this
  // group, read through there; NOT_FOUND when this node is the owner, was
  // asked as the owner (kOwnerFetch), or the owner is suspected down.
  absl::StatusOr<std::string> FetchFromOwner(const ChunkKey& key, uint32_t offset, uint32_t length,
                                             ChunkSourcing sourcing);
  // Bytes [offset, offset + length) of chunk `key` of file `entry`, from
  // where a miss gets them: the chunk's owner (FetchFromOwner), else a peer
  // that holds them while peers are the faster way, else the source, read
  // for `use` (ReadLacking). Bytes from another node count as a peer copy.
  absl::StatusOr<ChunkData> Obtain(const Manifest& manifest, const ManifestEntry& entry,
                                   const ChunkKey& key, uint32_t offset, uint32_t length,
                                   ChunkSourcing sourcing, SourceUse use);
  // Bytes [offset, offset + length) of chunk `key` from the first of `peers`
  // (ClusterView::CopySources()) that holds them; NOT_FOUND when none does.
  absl::StatusOr<std::string> CopyFromPeer(std::span<const Member> peers, const ChunkKey& key,
                                           uint32_t offset, uint32_t length);
  // Bytes [offset, offset + length) of chunk `key` from `peer`, read as
  // `sourcing` says. A failure of the peer's own (neither a miss nor an
  // answer every node would give) is counted, logged, and makes the peer a
  // suspect.
  absl::StatusOr<std::string> ReadFromPeer(const Member& peer, const ChunkKey& key, uint32_t offset,
                                           uint32_t length, ChunkSourcing sourcing);
  // Counts, logs and suspects `peer` for `read`, its failure to answer chunk
  // `key`, unless every node would have answered so (a miss among them);
  // whether it did.
  bool NoteFailedPeerRead(const Member& peer, const ChunkKey& key, const absl::Status& read);
  // Bytes [offset, offset + length) of chunk `key` of file `entry`, from the
  // source, in the turns (SourceTurns) that `use` is given.
  absl::StatusOr<std::string> ReadSource(const Manifest& manifest, const ManifestEntry& entry,
                                         const ChunkKey& key, uint64_t offset, uint64_t length,
                                         SourceUse use);
  // The same bytes, of which those the store holds (of a chunk held in part)
  // are read from the store, verified, those an earlier read of this node is
  // fetching (SourceReadsInFlight) or has fetched and not stored yet
  // (WriteBehind) are taken from it, and only the rest read
  // from the source: a chunk held in part costs the source what it lacks,
  // not what it holds, when a reader asks for it whole or for blocks around
  // a part held, as when the cache is full and keeps it in part; and misses
  // that overlap (a reader's blocks, then its whole chunk) read each byte once.
  absl::StatusOr<ChunkData> ReadLacking(const Manifest& manifest, const ManifestEntry& entry,
                                        const ChunkKey& key, uint64_t offset, uint64_t length,
                                        SourceUse use);
  // ReadLacking()'s bytes [offset, end), given the earlier reads overlapping them.
  absl::StatusOr<std::string> Assemble(const Manifest& manifest, const ManifestEntry& entry,
                                       const ChunkKey& key, uint64_t offset, uint64_t end,
                                       SourceUse use,
                                       std::span<const SourceReadsInFlight::Earlier> earlier);

  Catalog* const catalog_;
  store::ChunkStore* const store_;
  ServerMetrics* const metrics_;
  VersionActivity* const activity_;
  ClusterView* const cluster_;
  WriteBehind* const write_behind_;
  Sources* const sources_;
  MissListener miss_listener_;
  MetadataChangeListener metadata_change_listener_;
  SourceJournal* journal_ = nullptr;
  std::atomic<int> readers_waiting_{0};
  // When the last reader's miss was answered (steady_clock ticks).
  std::atomic<int64_t> last_reader_miss_{0};
  SingleFlight<ChunkKey, absl::StatusOr<ChunkData>> flights_;
  SingleFlight<BlockRange, absl::StatusOr<Blocks>> block_flights_;
  SourceReadsInFlight reads_in_flight_;
  FetchSpeeds speeds_;
  SourceTurns turns_;
};

// Checks that `key` names an existing chunk of a file of `manifest`, and
// returns that file's entry.
absl::StatusOr<const ManifestEntry*> ChunkEntry(const Manifest& manifest, const ChunkKey& key);

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_READ_PATH_READ_THROUGH_H_
