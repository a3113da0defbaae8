// Helpers shared by the chunk store tests: scratch directories, deterministic
// chunk contents and store options sized for fast tests.
//
// Thread-safety: ChunkBytes is a pure function; ScratchDir is one test's.
#ifndef GRANARY_TESTS_STORE_STORE_TEST_UTIL_H_
#define GRANARY_TESTS_STORE_STORE_TEST_UTIL_H_

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "cache_server/store/chunk_store.h"
#include "common/dataset/chunk_key.h"

namespace granary::store::testing {

// A fresh directory under the system temp dir, removed on destruction.
class ScratchDir {
 public:
  ScratchDir();
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::string Sub(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// Bytes that depend on the key, the length and `generation`, so that a chunk
// read back can be checked against what was written.
std::string ChunkBytes(const ChunkKey& key, uint64_t length, uint64_t generation = 0);

// One cache directory and an index under `dir`.
StoreOptions SmallStoreOptions(const ScratchDir& dir, uint64_t capacity_bytes,
                               uint64_t max_chunk_bytes);

// The chunk size of the dataset versions the tests' chunks belong to: the
// largest there is, so that any test chunk fits; chunk i of a file lies at
// i × this in its data file (holes cost nothing).
inline constexpr uint32_t kAnyChunkSize = 64 << 20;

// The blocks holding data in every data file under the store's directories
// (holes not counted), each run of data rounded up to whole 4 KiB blocks.
uint64_t DataFileBytes(const StoreOptions& options);

// Every data file under the store's directories.
std::vector<std::filesystem::path> DataFiles(const StoreOptions& options);

}  // namespace granary::store::testing

#endif  // GRANARY_TESTS_STORE_STORE_TEST_UTIL_H_
