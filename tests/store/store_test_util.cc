#include "tests/store/store_test_util.h"

#include <stdlib.h>

#include <algorithm>
#include <cstring>
#include <system_error>

#include "cache_server/store/segment_file.h"

namespace granary::store::testing {

ScratchDir::ScratchDir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "granary-store-XXXXXX").string();
  path_ = ::mkdtemp(pattern.data());
}

ScratchDir::~ScratchDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

std::string ChunkBytes(const ChunkKey& key, uint64_t length, uint64_t generation) {
  std::string bytes(length, '\0');
  uint64_t state = key.dataset_version * 0x9e3779b97f4a7c15ull ^
                   key.file_id * 0xbf58476d1ce4e5b9ull ^ (uint64_t{key.chunk_index} << 32) ^
                   generation ^ length;
  for (uint64_t i = 0; i < length; i += sizeof(state)) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    std::memcpy(bytes.data() + i, &state, std::min<uint64_t>(sizeof(state), length - i));
  }
  return bytes;
}

StoreOptions SmallStoreOptions(const ScratchDir& dir, uint64_t capacity_bytes,
                               uint64_t max_chunk_bytes) {
  StoreOptions options;
  options.directories = {dir.Sub("cache")};
  options.index_path = dir.Sub("index");
  options.capacity_bytes = capacity_bytes;
  options.max_chunk_bytes = max_chunk_bytes;
  options.segment_bytes = 4 * max_chunk_bytes;
  return options;
}

uint64_t SegmentFileBytes(const StoreOptions& options) {
  uint64_t total = 0;
  for (const std::string& directory : options.directories) {
    for (const auto& entry : std::filesystem::directory_iterator(directory)) {
      if (SegmentFile::ParseFileName(entry.path().filename().string())) {
        total += entry.file_size();
      }
    }
  }
  return total;
}

}  // namespace granary::store::testing
