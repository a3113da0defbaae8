// store_crash_writer ROOT SEED: opens the chunk store of crash_workload.h under
// ROOT, prints "ready", and inserts chunks and blocks of chunks, reads and
// removes them until it is killed. The crash
// test SIGKILLs it at random moments and then checks the store it left.
#include <cstdlib>
#include <iostream>
#include <random>

#include "cache_server/store/chunk_store.h"
#include "tests/store/crash_workload.h"
#include "tests/store/store_test_util.h"

int main(int argc, char** argv) {
  using namespace granary::store;
  if (argc != 3) {
    std::cerr << "usage: store_crash_writer ROOT SEED\n";
    return 2;
  }
  const uint64_t seed = std::strtoull(argv[2], nullptr, 10);
  StoreOptions options = testing::CrashStoreOptions(argv[1]);
  options.use_io_uring = seed % 2 == 0;
  options.direct_io = seed % 3 == 0;
  auto store = ChunkStore::Open(options);
  if (!store.ok()) {
    std::cerr << "store_crash_writer: " << store.status() << "\n";
    return 1;
  }
  (*store)->SetVersionState(2, seed % 4 == 0 ? VersionState::kActive : VersionState::kInactive);
  std::cout << "ready" << std::endl;
  std::mt19937_64 random(seed);
  for (uint64_t i = 0;; ++i) {
    const granary::ChunkKey key{
        .dataset_version = testing::kCrashVersions[random() % std::size(testing::kCrashVersions)],
        .file_id = random() % 4,
        .chunk_index = static_cast<uint32_t>(random() % 64)};
    if (i % 200 == 199) {
      if (auto removed = (*store)->RemoveVersion(3); !removed.ok()) {
        std::cerr << "store_crash_writer: " << removed.status() << "\n";
        return 1;
      }
    } else if (i % 3 == 0) {
      (void)(*store)->Read(key);
    } else if (i % 3 == 1) {
      // Some blocks of the chunk, as a reader's miss of part of it stores.
      const uint64_t length = testing::CrashChunkLength(key);
      const uint64_t blocks = (length + testing::kCrashBlockBytes - 1) / testing::kCrashBlockBytes;
      const uint64_t first = random() % blocks;
      const uint64_t offset = first * testing::kCrashBlockBytes;
      const uint64_t count = 1 + random() % (blocks - first);
      const std::string bytes =
          testing::ChunkBytes(key, length).substr(offset, count * testing::kCrashBlockBytes);
      auto stored = (*store)->InsertBlocks(key, testing::kAnyChunkSize,
                                           static_cast<uint32_t>(length), offset, bytes);
      if (!stored.ok()) {
        std::cerr << "store_crash_writer: " << stored.status() << "\n";
        return 1;
      }
    } else {
      auto stored = (*store)->Insert(key, testing::kAnyChunkSize,
                                     testing::ChunkBytes(key, testing::CrashChunkLength(key)));
      if (!stored.ok()) {
        std::cerr << "store_crash_writer: " << stored.status() << "\n";
        return 1;
      }
    }
  }
}
