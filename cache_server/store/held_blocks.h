// Which checksum blocks of a chunk an index entry (v1::ChunkLocation) holds.
// An entry holds its chunk whole, or, when a reader asked for part of a
// chunk and only that part was fetched (ChunkStore::InsertBlocks), some of
// its blocks: then its `held_blocks` bitmap names them, its length is still
// the whole chunk's, its block checksums are those of the blocks held (0 for
// the others), and its whole-chunk XXH3 is unknown (0). Each held block was
// checksummed from the bytes fetched, so a partial entry is verified block by
// block exactly as a whole one is read by range.
//
// Thread-safety: pure functions.
#ifndef GRANARY_CACHE_SERVER_STORE_HELD_BLOCKS_H_
#define GRANARY_CACHE_SERVER_STORE_HELD_BLOCKS_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "proto/granary.pb.h"

namespace granary::store {

// Most checksums a partial entry lists: 8 KiB of them, read with every
// lookup of the chunk.
inline constexpr uint64_t kMaxPartialBlocks = 1024;

// The checksum block of chunks held in part, of a version with chunks of
// `chunk_size`: `smallest` (a multiple of 4 KiB), or the least multiple of
// 4 KiB that cuts a chunk into at most kMaxPartialBlocks blocks, if larger.
uint64_t PartialBlockBytes(uint64_t smallest, uint64_t chunk_size);

// Whether the entry holds only some blocks of its chunk.
bool IsPartial(const v1::ChunkLocation& location);

// Whether the entry is whole, or held in part with a checksum and a bit for
// each block and at least one block held (else the index is damaged).
bool WellFormed(const v1::ChunkLocation& location);

// Whether the entry holds every block covering [offset, offset + length) of
// its chunk (always, for a whole chunk).
bool HoldsRange(const v1::ChunkLocation& location, uint64_t offset, uint64_t length);

// The bytes of the chunk the entry holds: its length when whole.
uint64_t HeldBytes(const v1::ChunkLocation& location);

// The bytes of the chunk held, as ranges [begin, end) of the chunk in order,
// adjacent blocks merged: [0, length) when whole.
struct HeldExtent {
  uint64_t begin = 0;
  uint64_t end = 0;
};
std::vector<HeldExtent> HeldExtents(const v1::ChunkLocation& location);

// What the held bytes take on disk: each extent in whole 4 KiB blocks.
uint64_t HeldDiskBytes(const v1::ChunkLocation& location);

// An entry for chunk of `chunk_length` bytes in blocks of `block_bytes`
// holding none of them yet (a partial entry to add blocks to).
v1::ChunkLocation EmptyPartialEntry(uint64_t chunk_length, uint64_t block_bytes);

// Adds `data`, the chunk's bytes from the start of block `first_block` to the
// end of a block or of the chunk, to the partial entry `location`: marks its
// blocks held and records their checksums.
void AddHeldBlocks(uint64_t first_block, std::string_view data, v1::ChunkLocation& location);

// Adds the blocks `from` holds, with their checksums, to `into`: partial
// entries of one chunk in blocks of one size.
void MergeHeldBlocks(const v1::ChunkLocation& from, v1::ChunkLocation& into);

}  // namespace granary::store

#endif  // GRANARY_CACHE_SERVER_STORE_HELD_BLOCKS_H_
