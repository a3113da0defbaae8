// LocalExtents remembers, for one open file, what the local granaryd said
// about each of its chunks: where it holds it (a descriptor of the data file
// and the chunk's location with its checksums), or that it does not. So a
// chunk read many times through granary-fuse (a large file read in 128 KiB
// or 1 MiB requests, random reads of a shard) costs one round trip to
// granaryd, not one per read, and a miss is asked about once, not at every
// step of the read path. Every read is still verified against the chunk's
// block checksums (common/net/local_read_socket.h).
//
// "Not held here" is believed for `miss_ttl`: a chunk read through meanwhile
// (by this reader or another) is stored by its owner, which may be this node.
//
// Thread-safety: every method may be called concurrently.
#ifndef GRANARY_FUSE_CLIENT_READ_PATH_LOCAL_EXTENTS_H_
#define GRANARY_FUSE_CLIENT_READ_PATH_LOCAL_EXTENTS_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "common/base/mutex.h"
#include "common/net/local_read_socket.h"

namespace granary::fuse {

class LocalExtents {
 public:
  explicit LocalExtents(std::chrono::milliseconds miss_ttl) : miss_ttl_(miss_ttl) {}

  // Reads `out.size()` bytes at `offset_in_chunk` of chunk `key` from the
  // local store, verified, asking `local` where the chunk lies unless that is
  // known. NOT_FOUND when the store does not hold it; DATA_LOSS when the bytes
  // do not match (the chunk is then asked about afresh next time); other
  // errors as LocalChunkReader's. `*asked` says whether granaryd was asked
  // (and so counted the read).
  absl::Status ReadVerified(LocalChunkReader& local, const ChunkKey& key, uint32_t offset_in_chunk,
                            std::span<char> out, bool* asked);
  // Asks the kernel to start reading chunk `key` from disk; errors as ReadVerified().
  absl::Status Prefetch(LocalChunkReader& local, const ChunkKey& key);

 private:
  struct Known {
    std::shared_ptr<const LocalChunkReader::Extent> extent;  // Null: not held.
    std::chrono::steady_clock::time_point asked_at;
  };

  // The extent of chunk `key`, from memory or asked for (counted as serving
  // `read_bytes`); null when it is not held here.
  absl::StatusOr<std::shared_ptr<const LocalChunkReader::Extent>> Find(LocalChunkReader& local,
                                                                       const ChunkKey& key,
                                                                       uint64_t read_bytes,
                                                                       bool* asked);
  void Forget(uint32_t chunk_index);

  const std::chrono::milliseconds miss_ttl_;
  Mutex mutex_;
  absl::flat_hash_map<uint32_t, Known> known_ ABSL_GUARDED_BY(mutex_);  // By chunk index.
};

}  // namespace granary::fuse

#endif  // GRANARY_FUSE_CLIENT_READ_PATH_LOCAL_EXTENTS_H_
