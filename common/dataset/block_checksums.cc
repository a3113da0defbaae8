#include "common/dataset/block_checksums.h"

#include <algorithm>

#include "common/dataset/hash.h"

namespace granary {

void SetBlockChecksums(std::string_view data, uint64_t block_bytes, v1::ChunkLocation& location) {
  location.set_checksum_block_bytes(static_cast<uint32_t>(block_bytes));
  for (uint64_t at = 0; at < data.size(); at += block_bytes) {
    location.add_block_xxh3(Xxh3(data.data() + at, std::min(block_bytes, data.size() - at)));
  }
}

bool HasBlockChecksums(const v1::ChunkLocation& location) {
  const uint64_t block_bytes = location.checksum_block_bytes();
  return block_bytes != 0 && static_cast<uint64_t>(location.block_xxh3_size()) ==
                                 (location.length() + block_bytes - 1) / block_bytes;
}

CoveringBlocks BlocksCovering(const v1::ChunkLocation& location, uint64_t offset, uint64_t length) {
  const uint64_t block_bytes = location.checksum_block_bytes();
  const uint64_t first_block = offset / block_bytes;
  return {.first_block = first_block,
          .begin = first_block * block_bytes,
          .end = std::min<uint64_t>(
              location.length(), (offset + length + block_bytes - 1) / block_bytes * block_bytes)};
}

std::optional<uint64_t> MismatchedBlock(const v1::ChunkLocation& location, uint64_t first_block,
                                        const char* data, uint64_t length) {
  const uint64_t block_bytes = location.checksum_block_bytes();
  for (uint64_t at = 0, block = first_block; at < length; at += block_bytes, ++block) {
    if (Xxh3(data + at, std::min(block_bytes, length - at)) !=
        location.block_xxh3(static_cast<int>(block))) {
      return block;
    }
  }
  return std::nullopt;
}

}  // namespace granary
