// MappedChunk is a range of a chunk that the local granaryd holds, read in
// place: a read-only shared mapping of the chunk's bytes in granaryd's segment
// file, so a reader copies them straight out of the kernel's page cache, and
// the chunk's XXH3s to verify them with. The local read path
// (common/local_read_socket.h) hands these out.
//
// Bytes are verified each time they are handed out (Verified()), not once when
// mapped: the kernel may drop mapped pages and read them from disk again, and
// every byte read from disk is checked before it is used. Segment files never
// shrink (cache_server/store), so a range that lay inside its segment when
// mapped stays readable, even after the segment is reclaimed: its pages stay
// until the last mapping goes.
//
// Thread-safety: immutable once made; Verified() may be called concurrently.
#ifndef GRANARY_COMMON_MAPPED_CHUNK_H_
#define GRANARY_COMMON_MAPPED_CHUNK_H_

#include <cstdint>
#include <span>

#include "absl/status/statusor.h"
#include "common/chunk_key.h"
#include "proto/granary.pb.h"

namespace granary {

class MappedChunk {
 public:
  // Maps bytes [offset, offset + length) of chunk `key`, stored at `location`
  // in the segment open as `segment_fd`, rounded out to the blocks covering
  // them (the whole chunk when it has no block checksums), and faults them in.
  // OUT_OF_RANGE past the chunk's end; DATA_LOSS when the segment ends before
  // the chunk does.
  static absl::StatusOr<MappedChunk> Map(int segment_fd, const v1::ChunkLocation& location,
                                         const ChunkKey& key, uint64_t offset, uint64_t length);

  MappedChunk(MappedChunk&& other) noexcept;
  MappedChunk& operator=(MappedChunk&&) = delete;
  MappedChunk(const MappedChunk&) = delete;
  MappedChunk& operator=(const MappedChunk&) = delete;
  ~MappedChunk();

  // The mapped range of the chunk: [begin(), end()).
  uint64_t begin() const { return begin_; }
  uint64_t end() const { return end_; }

  // Bytes [offset, offset + length) of the chunk, which must lie in the mapped
  // range, verified now against the checksums of the blocks covering them.
  // DATA_LOSS naming the chunk and the block on a mismatch.
  absl::StatusOr<std::span<const char>> Verified(uint64_t offset, uint64_t length) const;

 private:
  MappedChunk(void* mapping, size_t mapping_bytes, const char* data, uint64_t begin, uint64_t end,
              v1::ChunkLocation location, ChunkKey key)
      : mapping_(mapping),
        mapping_bytes_(mapping_bytes),
        data_(data),
        begin_(begin),
        end_(end),
        location_(std::move(location)),
        key_(key) {}

  void* mapping_;  // Null once moved from.
  size_t mapping_bytes_;
  const char* data_;  // Byte begin_ of the chunk, inside the mapping.
  uint64_t begin_;
  uint64_t end_;
  v1::ChunkLocation location_;
  ChunkKey key_;
};

}  // namespace granary

#endif  // GRANARY_COMMON_MAPPED_CHUNK_H_
