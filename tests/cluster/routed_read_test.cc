// Readers route each chunk read to its owner: four real granaryd nodes with a
// members file and a cluster token (a1, a2, a3 in rack-a; b1 in rack-b), a
// granary-fuse mount on a1 and `granary cat` through a1. Every chunk is read
// from the source by its ring owner in rack-a; b1, in another group,
// serves nothing; a second reader finds every chunk cached at its owner.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "client/dataset_client.h"
#include "grpcpp/client_context.h"
#include "tests/fuse/fuse_mount.h"
#include "tests/server/server_test_util.h"
#include "tests/support/child_process.h"
#include "tests/support/granary_cluster.h"

namespace granary {
namespace {

using testing::PatternBytes;

using testing::FuseMount;
using testing::GranaryCluster;
using testing::TempDir;

constexpr uint32_t kChunkSize = 1 << 20;
constexpr int kFiles = 12;
constexpr size_t kFileSize = 5 * kChunkSize / 2;  // Three chunks, the last one half full.

std::string FileBytes(int file) { return PatternBytes(kFileSize, file); }

std::string ReadWhole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class RoutedReadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int file = 0; file < kFiles; ++file) {
      std::ofstream(source_.path() + "/file" + std::to_string(file)) << FileBytes(file);
    }
    auto cluster = GranaryCluster::StartFormed(
        {.nodes = {{"a1", "rack-a"}, {"a2", "rack-a"}, {"a3", "rack-a"}, {"b1", "rack-b"}},
         .etcd_endpoint = "",
         .extra_args = {}});
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = *std::move(cluster);
    absl::StatusOr<v1::DatasetInfo> registered =
        cluster_->RegisterDataset(0, "images", source_.path(), kChunkSize);
    ASSERT_TRUE(registered.ok()) << registered.status();
    auto client = DatasetClient::Connect(cluster_->node(0).socket_address());
    auto snapshot = (*client)->GetManifest("images");
    ASSERT_TRUE(snapshot.ok()) << snapshot.status();
    auto map = ClusterMap::Build(cluster_->Members());
    ASSERT_TRUE(map.ok());
    owned_ = testing::ChunksPerOwner(snapshot->manifest, **map, "rack-a");
    ASSERT_EQ(owned_.size(), 3u) << "every rack-a node owns some chunk";
  }

  // Sample `name` of node `i`; 0 if the node never counted it.
  double Metric(size_t i, const std::string& name) {
    auto value = cluster_->node(i).Metric(name);
    return value.ok() ? *value : 0;
  }

  // Every chunk was read from the source by its owner in rack-a alone. A
  // file's first reads fetch only the blocks they cover, each as it reaches
  // granary-fuse (the kernel's first reads of a file may arrive in either
  // order), before the reader, found sequential, asks for the whole chunk,
  // which costs the source what is still lacking: how many reads that takes
  // depends on the order, and the bytes are bounded instead. Those first
  // reads cost the source at most 5% more bytes than the files hold.
  void ExpectSourceReadsByOwnersOnly() {
    double source_bytes = 0;
    for (size_t i = 0; i < cluster_->size(); ++i) {
      const std::string& id = cluster_->spec(i).id;
      EXPECT_GE(Metric(i, "granary_source_reads_total"), owned_[id]) << id;
      if (owned_[id] == 0) {
        EXPECT_EQ(Metric(i, "granary_source_reads_total"), 0) << id;
      }
      EXPECT_EQ(Metric(i, "granary_peer_copies_total"), 0) << id;
      source_bytes += Metric(i, "granary_bytes_from_source_total");
    }
    EXPECT_GE(source_bytes, kFiles * kFileSize);
    EXPECT_LE(source_bytes, 1.05 * kFiles * kFileSize);
  }

  TempDir source_;
  TempDir dir_;
  std::unique_ptr<GranaryCluster> cluster_;
  std::map<std::string, int> owned_;  // Chunks each member owns in rack-a.
};

TEST_F(RoutedReadTest, AMountReadsEachChunkFromItsOwnerAndCatFindsThemCached) {
  auto mount = FuseMount::Start(cluster_->node(0).socket_address(),
                                {"--token-file", cluster_->cluster_token_file()}, "images");
  ASSERT_TRUE(mount.ok()) << mount.status();
  for (int file = 0; file < kFiles; ++file) {
    std::string name = "file" + std::to_string(file);
    ASSERT_TRUE(ReadWhole((*mount)->path() + "/images/" + name) == FileBytes(file)) << name;
  }
  ExpectSourceReadsByOwnersOnly();
  EXPECT_EQ((*mount)->log().find("reading sources directly"), std::string::npos) << (*mount)->log();

  // `granary cat` takes the token from the environment and finds every chunk
  // at its owner.
  std::vector<double> hits;
  for (size_t i = 0; i < cluster_->size(); ++i) {
    hits.push_back(Metric(i, "granary_cache_hits_total"));
  }
  ASSERT_EQ(setenv("GRANARY_TOKEN_FILE", cluster_->cluster_token_file().c_str(), 1), 0);
  for (int file = 0; file < kFiles; ++file) {
    std::string output = dir_.path() + "/cat" + std::to_string(file);
    auto pid = testing::SpawnChild(GRANARY_CLI_PATH,
                                   {"--server", cluster_->node(0).socket_address(), "cat",
                                    "images/file" + std::to_string(file)},
                                   output);
    ASSERT_TRUE(pid.ok()) << pid.status();
    std::optional<int> status = testing::WaitForExit(*pid, std::chrono::seconds(60));
    ASSERT_TRUE(status.has_value() && WIFEXITED(*status) && WEXITSTATUS(*status) == 0);
    // Standard error shares the file: it must be empty.
    ASSERT_TRUE(ReadWhole(output) == FileBytes(file)) << "file" << file;
  }
  unsetenv("GRANARY_TOKEN_FILE");
  ExpectSourceReadsByOwnersOnly();
  for (size_t i = 0; i < cluster_->size(); ++i) {
    const std::string& id = cluster_->spec(i).id;
    EXPECT_EQ(Metric(i, "granary_cache_hits_total") - hits[i], owned_[id]) << id;
  }
}

TEST_F(RoutedReadTest, WithoutTheTokenPeersRefuseAndTheMountStillReadsEveryByte) {
  auto mount = FuseMount::Start(cluster_->node(0).socket_address(), {}, "images");
  ASSERT_TRUE(mount.ok()) << mount.status();
  for (int file = 0; file < kFiles; ++file) {
    std::string name = "file" + std::to_string(file);
    ASSERT_TRUE(ReadWhole((*mount)->path() + "/images/" + name) == FileBytes(file)) << name;
  }
  // a1 is reached over its socket, which needs no token; the TCP peers
  // refused every call of the mount, which read their chunks from a1 (which
  // fetches them through their owners, with the token) or from the source.
  // Either way no owner read a chunk twice.
  for (size_t i = 1; i < cluster_->size(); ++i) {
    const std::string& id = cluster_->spec(i).id;
    EXPECT_LE(Metric(i, "granary_source_reads_total"), owned_[id]) << id;
  }
  EXPECT_NE((*mount)->log().find("UNAUTHENTICATED"), std::string::npos) << (*mount)->log();
  EXPECT_NE((*mount)->log().find("reading sources directly"), std::string::npos) << (*mount)->log();
}

}  // namespace
}  // namespace granary
