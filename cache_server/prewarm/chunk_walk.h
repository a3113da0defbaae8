// ChunkWalk is the order in which a PrewarmJob hands out its chunks: the
// planned chunks in file id order (which is path order, so a directory's files
// come together), each handed out once. Prefer() puts the chunks that follow a
// reader's miss first: the rest of its file, then the files after it in its
// directory (and below it), up to kPreferredChunks, since a reader that missed
// one file is likely to open its neighbours next. The run stops at the
// directory's end: a miss in the last files of one directory says nothing
// about the next one, and a fill reading another directory's chunks there (a
// shard of gigabytes after a folder of images) would only take the source's
// bandwidth from the readers.
//
// A fill asks for the preferred run alone while readers are missing, so that
// it fetches nothing far from them then (Order::kPreferredOnly).
//
// A file marked failed has its remaining chunks skipped.
//
// Thread-safety: chunk() and size() may be called concurrently with anything
// (the plan never changes); the rest needs external synchronization.
#ifndef GRANARY_CACHE_SERVER_PREWARM_CHUNK_WALK_H_
#define GRANARY_CACHE_SERVER_PREWARM_CHUNK_WALK_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "common/dataset/chunk_key.h"
#include "common/dataset/manifest.h"

namespace granary {

class ChunkWalk {
 public:
  // One chunk of the plan: which file, which chunk of it, how long.
  struct PlannedChunk {
    uint64_t file_id;
    uint32_t chunk_index;
    uint32_t length;
  };

  // Chunks after a reader's miss that are handed out before going on in
  // order, and how far past the miss the run may reach (chunks already handed
  // out in between are passed over).
  static constexpr size_t kPreferredChunks = 64;
  static constexpr size_t kPreferredReach = 4 * kPreferredChunks;

  // `chunks` in file id order, then chunk order, of a manifest of
  // `file_count` entries.
  ChunkWalk(std::vector<PlannedChunk> chunks, size_t file_count);

  size_t size() const { return chunks_.size(); }
  const PlannedChunk& chunk(size_t index) const { return chunks_[index]; }

  // Hands out the chunks that follow `missed` in its directory of `manifest`
  // (the manifest the chunks were planned from) next.
  void Prefer(const Manifest& manifest, const ChunkKey& missed);
  enum class Order {
    kAny,            // The preferred run, then the walk in order.
    kPreferredOnly,  // Only what the preferred run holds.
  };
  // The index of the next chunk to fetch in `order`, or nullopt when none is.
  std::optional<size_t> Next(Order order = Order::kAny);
  // Whether the preferred run holds chunks to hand out.
  bool HasPreferred();
  // Whether every chunk has been handed out (or skipped).
  bool Exhausted();

  // Marks `file_id` failed; returns false if it already was.
  bool MarkFailed(uint64_t file_id);

 private:
  bool Available(size_t index) const { return !taken_[index] && !failed_[chunks_[index].file_id]; }

  const std::vector<PlannedChunk> chunks_;
  std::vector<bool> taken_;   // By chunk.
  std::vector<bool> failed_;  // By file id.
  size_t next_ = 0;           // The walk in order.
  size_t preferred_ = 0;      // The preferred run: [preferred_, preferred_end_).
  size_t preferred_end_ = 0;
  size_t preferred_left_ = 0;  // Chunks the run may still hand out.
};

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_PREWARM_CHUNK_WALK_H_
