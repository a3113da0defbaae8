#include "common/dataset/chunk_math.h"

#include <algorithm>

namespace granary {

std::vector<ChunkSlice> SliceRange(uint64_t file_size, uint32_t chunk_size, uint64_t offset,
                                   uint64_t length) {
  std::vector<ChunkSlice> slices;
  if (offset >= file_size) return slices;
  uint64_t end = std::min(file_size, offset + std::min(length, file_size - offset));
  uint64_t position = offset;
  while (position < end) {
    uint64_t index = position / chunk_size;
    uint64_t chunk_end = std::min(end, (index + 1) * chunk_size);
    slices.push_back(ChunkSlice{static_cast<uint32_t>(index),
                                static_cast<uint32_t>(position - index * chunk_size),
                                static_cast<uint32_t>(chunk_end - position), position - offset});
    position = chunk_end;
  }
  return slices;
}

}  // namespace granary
