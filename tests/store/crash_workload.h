// The workload of the crash test, shared by the writer process that gets
// killed (crash_writer.cc) and the test that checks what it left behind
// (crash_test.cc): both derive a chunk's length and bytes from its key alone.
//
// Thread-safety: pure functions.
#ifndef GRANARY_TESTS_STORE_CRASH_WORKLOAD_H_
#define GRANARY_TESTS_STORE_CRASH_WORKLOAD_H_

#include <cstdint>
#include <string>

#include "cache_server/store/chunk_store.h"
#include "common/dataset/chunk_key.h"
#include "common/dataset/hash.h"

namespace granary::store::testing {

inline constexpr uint64_t kCrashVersions[] = {1, 2, 3};
inline constexpr uint64_t kCrashMaxChunkBytes = 256 << 10;
// The store's checksum block (its default), the unit of blocks of chunks.
inline constexpr uint64_t kCrashBlockBytes = 64 << 10;

inline StoreOptions CrashStoreOptions(const std::string& root) {
  StoreOptions options;
  options.directories = {root + "/nvme0", root + "/nvme1"};
  options.index_path = root + "/index";
  options.capacity_bytes = 8 << 20;
  options.max_chunk_bytes = kCrashMaxChunkBytes;
  options.checksum_block_bytes = kCrashBlockBytes;
  return options;
}

// 1 byte to kCrashMaxChunkBytes, fixed per key.
inline uint64_t CrashChunkLength(const ChunkKey& key) {
  const std::string encoded = key.Encode();
  return 1 + Xxh3(encoded) % kCrashMaxChunkBytes;
}

}  // namespace granary::store::testing

#endif  // GRANARY_TESTS_STORE_CRASH_WORKLOAD_H_
