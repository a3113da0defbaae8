#include "cache_server/store/held_blocks.h"

#include <algorithm>

#include "cache_server/store/aligned_buffer.h"
#include "common/dataset/hash.h"

namespace granary::store {
namespace {

uint64_t BlockCount(const v1::ChunkLocation& location) {
  const uint64_t block_bytes = location.checksum_block_bytes();
  return block_bytes == 0 ? 0 : (location.length() + block_bytes - 1) / block_bytes;
}

bool Held(const v1::ChunkLocation& location, uint64_t block) {
  const std::string& bits = location.held_blocks();
  return block / 8 < bits.size() &&
         ((static_cast<unsigned char>(bits[block / 8]) >> (block % 8)) & 1) != 0;
}

void MarkHeld(uint64_t block, std::string& bits) {
  bits[block / 8] =
      static_cast<char>(static_cast<unsigned char>(bits[block / 8]) | (1u << (block % 8)));
}

}  // namespace

uint64_t PartialBlockBytes(uint64_t smallest, uint64_t chunk_size) {
  const uint64_t per_block = (chunk_size + kMaxPartialBlocks - 1) / kMaxPartialBlocks;
  return std::max(smallest, RoundUpToBlock(per_block));
}

bool IsPartial(const v1::ChunkLocation& location) { return !location.held_blocks().empty(); }

bool WellFormed(const v1::ChunkLocation& location) {
  if (!IsPartial(location)) return true;
  const uint64_t blocks = BlockCount(location);
  return blocks > 0 && static_cast<uint64_t>(location.block_xxh3_size()) == blocks &&
         location.held_blocks().size() == (blocks + 7) / 8 && !HeldExtents(location).empty();
}

bool HoldsRange(const v1::ChunkLocation& location, uint64_t offset, uint64_t length) {
  if (!IsPartial(location) || length == 0) return true;
  const uint64_t block_bytes = location.checksum_block_bytes();
  if (block_bytes == 0) return false;
  for (uint64_t block = offset / block_bytes; block * block_bytes < offset + length; ++block) {
    if (!Held(location, block)) return false;
  }
  return true;
}

std::vector<HeldExtent> HeldExtents(const v1::ChunkLocation& location) {
  if (!IsPartial(location)) return {{0, location.length()}};
  std::vector<HeldExtent> extents;
  const uint64_t block_bytes = location.checksum_block_bytes();
  for (uint64_t block = 0; block < BlockCount(location); ++block) {
    if (!Held(location, block)) continue;
    const uint64_t begin = block * block_bytes;
    const uint64_t end = std::min<uint64_t>(begin + block_bytes, location.length());
    if (!extents.empty() && extents.back().end == begin) {
      extents.back().end = end;
    } else {
      extents.push_back({begin, end});
    }
  }
  return extents;
}

uint64_t HeldBytes(const v1::ChunkLocation& location) {
  uint64_t bytes = 0;
  for (const HeldExtent& extent : HeldExtents(location)) bytes += extent.end - extent.begin;
  return bytes;
}

uint64_t HeldDiskBytes(const v1::ChunkLocation& location) {
  uint64_t bytes = 0;
  for (const HeldExtent& extent : HeldExtents(location)) {
    bytes += RoundUpToBlock(extent.end - extent.begin);
  }
  return bytes;
}

v1::ChunkLocation EmptyPartialEntry(uint64_t chunk_length, uint64_t block_bytes) {
  v1::ChunkLocation location;
  location.set_length(static_cast<uint32_t>(chunk_length));
  location.set_checksum_block_bytes(static_cast<uint32_t>(block_bytes));
  const uint64_t blocks = (chunk_length + block_bytes - 1) / block_bytes;
  for (uint64_t block = 0; block < blocks; ++block) location.add_block_xxh3(0);
  location.set_held_blocks(std::string((blocks + 7) / 8, '\0'));
  return location;
}

void AddHeldBlocks(uint64_t first_block, std::string_view data, v1::ChunkLocation& location) {
  const uint64_t block_bytes = location.checksum_block_bytes();
  std::string& bits = *location.mutable_held_blocks();
  for (uint64_t at = 0, block = first_block; at < data.size(); at += block_bytes, ++block) {
    location.set_block_xxh3(static_cast<int>(block),
                            Xxh3(data.data() + at, std::min(block_bytes, data.size() - at)));
    MarkHeld(block, bits);
  }
}

void MergeHeldBlocks(const v1::ChunkLocation& from, v1::ChunkLocation& into) {
  std::string& bits = *into.mutable_held_blocks();
  const uint64_t blocks = std::min<uint64_t>(from.block_xxh3_size(), into.block_xxh3_size());
  for (uint64_t block = 0; block < blocks; ++block) {
    if (!Held(from, block)) continue;
    into.set_block_xxh3(static_cast<int>(block), from.block_xxh3(static_cast<int>(block)));
    MarkHeld(block, bits);
  }
}

}  // namespace granary::store
