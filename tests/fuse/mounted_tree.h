// What the mount tests share: deterministic file contents, small file and
// shell helpers, and MountedTree, a fixture with one real granaryd serving a
// source tree as dataset "ds" (1 MiB chunks) and a real granary-fuse mount of
// it.
//
// Thread-safety: the helpers are reentrant; a fixture belongs to its test.
#ifndef GRANARY_TESTS_FUSE_MOUNTED_TREE_H_
#define GRANARY_TESTS_FUSE_MOUNTED_TREE_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tests/fuse/fuse_mount.h"
#include "tests/support/granaryd_process.h"

namespace granary::testing {

inline constexpr uint32_t kChunk = 1u << 20;

// `size` bytes that depend on `seed` alone.
std::string RandomBytes(size_t size, uint64_t seed);
// Writes `bytes` to `path`, creating its directories (a test failure if it cannot).
void WriteFile(const std::string& path, const std::string& bytes);
// Everything `path` holds; empty if it cannot be read.
std::string ReadWhole(const std::string& path);
// Exit code and output (stdout and stderr) of `sh -c command`.
std::pair<int, std::string> Shell(const std::string& command);
// Registers `source` as dataset `name` with chunks of kChunk.
absl::Status AddDataset(GranarydProcess& server, const std::string& name,
                        const std::string& source);
// What `server` says of dataset `name`.
absl::StatusOr<v1::DatasetInfo> GetDataset(GranarydProcess& server, const std::string& name);

class MountedTree : public ::testing::Test {
 protected:
  // Fills `source_` before the dataset is registered.
  virtual void BuildTree() = 0;
  // granary-fuse's arguments besides the mount point and server.
  virtual std::vector<std::string> MountArgs() const {
    return {"--rpc-timeout-ms", "3000", "--retry-server-ms", "500"};
  }
  // granaryd's arguments besides those GranarydProcess sets.
  virtual std::vector<std::string> ServerArgs() const { return {}; }

  void SetUp() override;
  void Mount();

  TempDir source_dir_;
  std::string source_;
  std::unique_ptr<GranarydProcess> server_;
  std::unique_ptr<FuseMount> mount_;  // Destroyed (unmounted) first.
  std::string mounted_;
};

}  // namespace granary::testing

#endif  // GRANARY_TESTS_FUSE_MOUNTED_TREE_H_
