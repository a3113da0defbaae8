// Reads a byte range of one manifest file chunk by chunk, through any chunk
// reader: one server (DatasetClient), the owners in a cache group
// (ChunkRouter), or a fallback. Keeping the slicing here means every reader
// splits ranges the same way.
//
// Thread-safety: a pure function of its arguments; `read_chunk` is called
// from the calling thread only.
#ifndef GRANARY_CLIENT_CHUNK_READS_H_
#define GRANARY_CLIENT_CHUNK_READS_H_

#include <cstdint>
#include <span>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/dataset/chunk_key.h"
#include "common/dataset/manifest.h"

namespace granary {

// Reads `out.size()` bytes at `offset_in_chunk` of chunk `key` into `out`.
using ChunkReadFn = absl::FunctionRef<absl::Status(const ChunkKey& key, uint32_t offset_in_chunk,
                                                   std::span<char> out)>;

// Reads up to `out.size()` bytes of file `file_id` of `manifest` at `offset`
// and returns how many were read: fewer only at the end of the file.
// INVALID_ARGUMENT if `file_id` is not a regular file of the manifest; the
// first error of `read_chunk` otherwise.
absl::StatusOr<size_t> ReadFileThroughChunks(const Manifest& manifest, uint64_t file_id,
                                             uint64_t offset, std::span<char> out,
                                             ChunkReadFn read_chunk);

}  // namespace granary

#endif  // GRANARY_CLIENT_CHUNK_READS_H_
