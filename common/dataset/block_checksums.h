// Block checksums of a chunk: the XXH3 of each checksum_block_bytes piece of
// a chunk, kept in its v1::ChunkLocation, so that a range is verified by
// reading only the blocks that cover it. The store records them on insert and
// checks them on ranged reads; local readers (common/net/local_read_socket.h)
// check them on the bytes they read themselves.
//
// Thread-safety: pure functions.
#ifndef GRANARY_COMMON_DATASET_BLOCK_CHECKSUMS_H_
#define GRANARY_COMMON_DATASET_BLOCK_CHECKSUMS_H_

#include <cstdint>
#include <optional>
#include <string_view>

#include "proto/granary.pb.h"

namespace granary {

// Records the XXH3 of each `block_bytes` piece of `data` in `location`.
void SetBlockChecksums(std::string_view data, uint64_t block_bytes, v1::ChunkLocation& location);

// Whether `location` holds one checksum per block of its chunk (entries stored
// before blocks were checksummed hold none).
bool HasBlockChecksums(const v1::ChunkLocation& location);

// The bytes of a chunk that verifying a range of it reads: the whole blocks
// that cover the range, [begin, end) of the chunk, the first being
// `first_block`.
struct CoveringBlocks {
  uint64_t first_block;
  uint64_t begin;
  uint64_t end;
};

// The blocks covering the `length` bytes at `offset`, which lie within the
// chunk; HasBlockChecksums(location) must hold.
CoveringBlocks BlocksCovering(const v1::ChunkLocation& location, uint64_t offset, uint64_t length);

// The first block of `data` that does not match its checksum, or nullopt.
// `data` is `length` bytes of the chunk starting at the beginning of block
// `first_block` and ending at the end of a block or of the chunk;
// HasBlockChecksums(location) must hold.
std::optional<uint64_t> MismatchedBlock(const v1::ChunkLocation& location, uint64_t first_block,
                                        const char* data, uint64_t length);

}  // namespace granary

#endif  // GRANARY_COMMON_DATASET_BLOCK_CHECKSUMS_H_
