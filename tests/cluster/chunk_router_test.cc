#include "client/chunk_router.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>

#include "client/chunk_reads.h"
#include "client/dataset_client.h"
#include "grpcpp/client_context.h"
#include "tests/server/server_test_util.h"
#include "tests/support/granary_cluster.h"
#include "tests/support/granaryd_process.h"

namespace granary {
namespace {

using testing::AddDataset;
using testing::PatternBytes;

using testing::GranarydProcess;
using testing::TempDir;

constexpr uint32_t kChunkSize = 1 << 20;
constexpr int kFiles = 8;
constexpr size_t kFileSize = 5 * kChunkSize / 2;  // Three chunks, the last one half full.

std::string FileBytes(int file) { return PatternBytes(kFileSize, file); }

// Three real granaryd nodes in one cache group. Each holds the same catalog
// (the dataset registered on each with the same name, source and chunk size
// has the same version everywhere), so any of them can serve any chunk.
class ChunkRouterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int file = 0; file < kFiles; ++file) {
      std::ofstream(source_.path() + "/file" + std::to_string(file)) << FileBytes(file);
    }
    std::vector<Member> members;
    // One cluster token for the three, which the router presents to all.
    absl::StatusOr<std::string> token =
        testing::WriteRandomClusterToken(token_dir_.path() + "/token");
    ASSERT_TRUE(token.ok()) << token.status();
    for (int node = 0; node < 3; ++node) {
      testing::GranarydOptions server_options;
      server_options.cluster_token_file = token_dir_.path() + "/token";
      auto server = GranarydProcess::Start(server_options);
      ASSERT_TRUE(server.ok()) << server.status();
      v1::DatasetInfo info;
      ASSERT_TRUE(
          AddDataset((*server)->SocketStub().get(), "images", source_.path(), kChunkSize, &info)
              .ok());
      members.push_back({"node-" + std::to_string(node), (*server)->tcp_address()});
      servers_.push_back(*std::move(server));
    }
    auto map = ClusterMap::Build(members);
    ASSERT_TRUE(map.ok());
    ChunkRouter::Options options;
    options.client.read_timeout = std::chrono::seconds(5);
    options.client.cluster_token = *token;
    router_ = std::make_unique<ChunkRouter>(options, *map);
    auto client = DatasetClient::Connect(servers_[0]->socket_address());
    auto snapshot = (*client)->GetManifest("images");
    ASSERT_TRUE(snapshot.ok()) << snapshot.status();
    snapshot_ = std::make_unique<DatasetSnapshot>(*std::move(snapshot));
  }

  // Reads every file through the router and compares it with the source.
  void ReadAllAndVerify() {
    for (int file = 0; file < kFiles; ++file) {
      auto id = snapshot_->manifest.Find("file" + std::to_string(file));
      ASSERT_TRUE(id.has_value());
      std::string buffer(kFileSize, '\0');
      auto read = ReadFileThroughChunks(
          snapshot_->manifest, *id, 0, std::span<char>(buffer.data(), buffer.size()),
          [this](const ChunkKey& key, uint32_t offset, std::span<char> out) {
            return router_->ReadFromOwners(key, offset, out);
          });
      ASSERT_TRUE(read.ok()) << read.status();
      ASSERT_EQ(*read, kFileSize);
      ASSERT_TRUE(buffer == FileBytes(file)) << "file" << file;
    }
  }

  std::map<std::string, int> PredictedChunksPerNode() {
    return testing::ChunksPerOwner(snapshot_->manifest, *router_->members(), kDefaultGroup);
  }

  TempDir source_;
  TempDir token_dir_;
  std::vector<std::unique_ptr<GranarydProcess>> servers_;
  std::unique_ptr<ChunkRouter> router_;
  std::unique_ptr<DatasetSnapshot> snapshot_;
};

TEST_F(ChunkRouterTest, EachChunkIsReadFromTheSourceOnceByItsOwner) {
  ReadAllAndVerify();
  ReadAllAndVerify();
  std::map<std::string, int> predicted = PredictedChunksPerNode();
  int total = 0;
  for (int node = 0; node < 3; ++node) {
    auto source_reads = servers_[node]->Metric("granary_source_reads_total");
    ASSERT_TRUE(source_reads.ok()) << source_reads.status();
    EXPECT_EQ(*source_reads, predicted["node-" + std::to_string(node)]) << "node-" << node;
    total += static_cast<int>(*source_reads);
  }
  EXPECT_EQ(total, kFiles * 3);
}

TEST_F(ChunkRouterTest, ADeadOwnerIsRoutedAroundWithoutWrongBytes) {
  ASSERT_TRUE(servers_[1]->Kill().ok());
  auto started = std::chrono::steady_clock::now();
  ReadAllAndVerify();
  // One failed attempt marks node-1 suspect; later reads skip it at once.
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(20));
  // The chunks node-1 owns are now routed to another owner first.
  int owned_by_dead = 0;
  for (int file = 0; file < kFiles; ++file) {
    const uint64_t id = *snapshot_->manifest.Find("file" + std::to_string(file));
    for (uint32_t chunk = 0; chunk < 3; ++chunk) {
      ChunkKey key{snapshot_->manifest.version(), id, chunk};
      if (router_->members()->Owners(key, kDefaultGroup, 1)[0]->id != "node-1") continue;
      ++owned_by_dead;
      auto route = router_->Route(key);
      ASSERT_FALSE(route.empty());
      EXPECT_NE(route[0], "node-1") << key.ToString();
    }
  }
  EXPECT_GT(owned_by_dead, 0);
  ASSERT_TRUE(servers_[1]->Restart().ok());
}

TEST_F(ChunkRouterTest, NoLiveOwnerIsUnavailableAndAStaleFileIsNotRetried) {
  auto id = snapshot_->manifest.Find("file0");
  std::string buffer(100, '\0');
  std::ofstream(source_.path() + "/file0") << "changed";
  absl::Status stale = router_->ReadFromOwners(ChunkKey{snapshot_->manifest.version(), *id, 0}, 0,
                                               std::span<char>(buffer.data(), buffer.size()));
  EXPECT_EQ(stale.code(), absl::StatusCode::kFailedPrecondition) << stale;
  for (auto& server : servers_) ASSERT_TRUE(server->Kill().ok());
  absl::Status dead = router_->ReadFromOwners(ChunkKey{snapshot_->manifest.version(), *id, 1}, 0,
                                              std::span<char>(buffer.data(), buffer.size()));
  EXPECT_EQ(dead.code(), absl::StatusCode::kUnavailable) << dead;
}

}  // namespace
}  // namespace granary
