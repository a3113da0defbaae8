// Maps byte ranges of a file onto its chunks. A file of size S with chunk size C
// has ceil(S / C) chunks (one, of length 0, for an empty file is never needed:
// empty files have no chunks); chunk i covers [i*C, min((i+1)*C, S)).
//
// Thread-safety: pure functions.
#ifndef GRANARY_COMMON_DATASET_CHUNK_MATH_H_
#define GRANARY_COMMON_DATASET_CHUNK_MATH_H_

#include <cstdint>
#include <vector>

namespace granary {

inline constexpr uint32_t kDefaultChunkSize = 4u << 20;
inline constexpr uint32_t kMinChunkSize = 1u << 20;
inline constexpr uint32_t kMaxChunkSize = 64u << 20;

inline uint64_t ChunkCount(uint64_t file_size, uint32_t chunk_size) {
  return (file_size + chunk_size - 1) / chunk_size;
}

// Length of chunk `index` of a file of `file_size` bytes (0 past the end).
inline uint32_t ChunkLength(uint64_t file_size, uint32_t chunk_size, uint64_t index) {
  uint64_t start = index * chunk_size;
  if (start >= file_size) return 0;
  uint64_t rest = file_size - start;
  return static_cast<uint32_t>(rest < chunk_size ? rest : chunk_size);
}

// One piece of a file range that falls inside a single chunk.
struct ChunkSlice {
  uint32_t chunk_index;
  uint32_t offset_in_chunk;
  uint32_t length;
  uint64_t offset_in_range;  // Where the slice's bytes go in the caller's buffer.
};

// Splits [offset, offset + length) of a file of `file_size` bytes into
// per-chunk slices, clipped to the end of the file.
std::vector<ChunkSlice> SliceRange(uint64_t file_size, uint32_t chunk_size, uint64_t offset,
                                   uint64_t length);

}  // namespace granary

#endif  // GRANARY_COMMON_DATASET_CHUNK_MATH_H_
