// SourceReadsInFlight lists the ranges of chunks a node is reading from their
// sources, so that a read of bytes another read is fetching already waits for
// them instead of reading them again: however a chunk's misses overlap (a
// reader's blocks, then the whole chunk once the reader shows itself
// sequential, or a fill of the chunk), each byte is read from the source
// once. Identical misses share one flight before they get here
// (SingleFlight); this is for misses that overlap in part.
//
// A reader's read waits only for earlier readers' reads, never for a fill's
// (a reader's blocks never queue behind a fill's chunk: source_turns.h); a
// fill's read waits for any earlier read. A read waits only for reads begun
// before it, so waits never form a cycle; one that fails hands its waiters
// nothing, and they read those bytes themselves.
//
// Thread-safety: every method may be called concurrently.
#ifndef GRANARY_CACHE_SERVER_READ_PATH_SOURCE_READS_IN_FLIGHT_H_
#define GRANARY_CACHE_SERVER_READ_PATH_SOURCE_READS_IN_FLIGHT_H_

#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "common/base/mutex.h"
#include "common/dataset/chunk_key.h"

namespace granary {

class SourceReadsInFlight {
 public:
  // Bytes read; null for a read that failed.
  using Bytes = std::shared_ptr<const std::string>;
  // An earlier read overlapping a new one: its range of the chunk and, once
  // it ends, its bytes.
  struct Earlier {
    uint64_t begin = 0;
    uint64_t end = 0;
    std::shared_future<Bytes> bytes;
    // One whose bytes are in hand already (read, and waiting to be stored).
    static Earlier Done(uint64_t begin, Bytes bytes);
  };

  // One read in flight, from Begin() until Finish() or its destruction
  // (which finishes it as failed).
  class Reading {
   public:
    ~Reading();
    Reading(Reading&& other) noexcept;
    Reading(const Reading&) = delete;
    Reading& operator=(const Reading&) = delete;
    Reading& operator=(Reading&&) = delete;
    // The earlier reads it may wait for that overlap it, by where they begin.
    const std::vector<Earlier>& earlier() const { return earlier_; }
    // Hands `bytes` (bytes [begin, end) of the chunk, or null) to whoever
    // waits for this read, and takes it off the list.
    void Finish(Bytes bytes);

   private:
    friend class SourceReadsInFlight;
    Reading(SourceReadsInFlight* list, const ChunkKey& key, uint64_t id,
            std::vector<Earlier> earlier)
        : list_(list), key_(key), id_(id), earlier_(std::move(earlier)) {}
    SourceReadsInFlight* list_;  // Null once finished.
    ChunkKey key_;
    uint64_t id_;
    std::vector<Earlier> earlier_;
  };

  // Lists bytes [begin, end) of chunk `key` as being read, for a reader or
  // for a fill.
  Reading Begin(const ChunkKey& key, uint64_t begin, uint64_t end, bool for_reader);

 private:
  struct InFlight {
    uint64_t id = 0;
    uint64_t begin = 0;
    uint64_t end = 0;
    bool for_reader = false;
    std::shared_ptr<std::promise<Bytes>> promise;
    std::shared_future<Bytes> bytes;
  };
  void Finish(const ChunkKey& key, uint64_t id, Bytes bytes);

  Mutex mu_;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<ChunkKey, std::vector<InFlight>> reads_ ABSL_GUARDED_BY(mu_);
};

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_READ_PATH_SOURCE_READS_IN_FLIGHT_H_
