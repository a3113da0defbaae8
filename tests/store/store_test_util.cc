#include "tests/store/store_test_util.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <system_error>

#include "cache_server/store/aligned_buffer.h"
#include "cache_server/store/data_file.h"

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
  return options;
}

std::vector<std::filesystem::path> DataFiles(const StoreOptions& options) {
  std::vector<std::filesystem::path> files;
  for (const std::string& directory : options.directories) {
    for (const auto& entry : std::filesystem::recursive_directory_iterator(directory)) {
      if (entry.is_regular_file() && DataFile::ParseFileName(entry.path().filename().string())) {
        files.push_back(entry.path());
      }
    }
  }
  return files;
}

uint64_t DataFileBytes(const StoreOptions& options) {
  uint64_t total = 0;
  for (const std::filesystem::path& path : DataFiles(options)) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;  // Reclaimed since it was listed.
    off_t at = 0;
    while (true) {
      const off_t data = ::lseek(fd, at, SEEK_DATA);
      if (data < 0) break;
      const off_t hole = ::lseek(fd, data, SEEK_HOLE);
      total += RoundUpToBlock(static_cast<uint64_t>(hole)) - static_cast<uint64_t>(data);
      at = hole;
    }
    ::close(fd);
  }
  return total;
}

}  // namespace granary::store::testing
