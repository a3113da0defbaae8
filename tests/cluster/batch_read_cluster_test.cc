// Batches of whole files (client/granary_client.h) read on one node of a
// three-node cache group, through real granaryd processes on loopback: after
// a group prewarm, the reading node holds its own share and fetches the rest
// from their owners (each owner asked for all of its files of a batch at
// once), every byte the source's, each fetched file counted as one miss
// copied from a peer and stored, so the next batch is all hits; and with an
// owner SIGKILLed, a cold batch still reads every byte, that owner's share
// from the source.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/dataset_client.h"
#include "client/granary_client.h"
#include "tests/server/server_test_util.h"
#include "tests/support/granary_cluster.h"

namespace granary::testing {
namespace {

constexpr uint32_t kChunkSize = 1 << 20;
constexpr int kFiles = 90;
const std::vector<ClusterNode> kThreeNodes = {{"n1", "rack"}, {"n2", "rack"}, {"n3", "rack"}};

std::string FilePath(int i) { return absl::StrCat("f/", i, ".bin"); }
std::string FileBytes(int i) { return PatternBytes(1000 + 331 * i, i); }

class BatchReadClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < kFiles; ++i) {
      const std::string path = source_.path() + "/" + FilePath(i);
      std::filesystem::create_directories(std::filesystem::path(path).parent_path());
      std::ofstream(path) << FileBytes(i);
      paths_.push_back(FilePath(i));
    }
    auto cluster =
        GranaryCluster::StartFormed({.nodes = kThreeNodes, .etcd_endpoint = "", .extra_args = {}});
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = *std::move(cluster);
  }

  void Register(const std::string& name) {
    absl::StatusOr<v1::DatasetInfo> registered =
        cluster_->RegisterDataset(0, name, source_.path(), kChunkSize);
    ASSERT_TRUE(registered.ok()) << registered.status();
  }

  // How many of the files each node owns.
  std::map<std::string, int> Shares(const std::string& name) {
    auto client = DatasetClient::Connect(cluster_->node(0).socket_address());
    auto snapshot = (*client)->GetManifest(name);
    EXPECT_TRUE(snapshot.ok()) << snapshot.status();
    return ChunksPerOwner(snapshot->manifest, **ClusterMap::Build(cluster_->Members()), "rack");
  }

  // Reads every file in batches of 32 through n1's socket and checks every
  // byte.
  void ReadAllOnFirstNode(const std::string& name) {
    auto client = GranaryClient::Connect({.socket_path = cluster_->node(0).socket_path()});
    ASSERT_TRUE(client.ok()) << client.status();
    for (size_t begin = 0; begin < paths_.size(); begin += 32) {
      const std::span<const std::string> batch =
          std::span(paths_).subspan(begin, std::min<size_t>(32, paths_.size() - begin));
      auto read = (*client)->ReadMany(name, batch);
      ASSERT_TRUE(read.ok()) << read.status();
      for (size_t i = 0; i < batch.size(); ++i) {
        ASSERT_TRUE((*read)[i].ok()) << batch[i] << ": " << (*read)[i].status();
        ASSERT_TRUE(*(*read)[i] == FileBytes(static_cast<int>(begin + i))) << batch[i];
      }
    }
  }

  double Metric(size_t node, std::string_view name) {
    auto value = cluster_->node(node).Metric(name);
    EXPECT_TRUE(value.ok()) << value.status();
    return value.value_or(-1);
  }

  TempDir source_;
  std::vector<std::string> paths_;
  std::unique_ptr<GranaryCluster> cluster_;
};

TEST_F(BatchReadClusterTest, AfterAGroupPrewarmEachOwnersFilesAreFetchedOnceAndThenHeld) {
  Register("ds");
  v1::PrewarmRequest request;
  request.set_name("ds");
  request.set_group("rack");
  std::vector<v1::PrewarmProgress> progress;
  ASSERT_TRUE(Prewarm(cluster_->node(0).SocketStub().get(), request, &progress).ok());
  std::map<std::string, int> shares = Shares("ds");
  const int elsewhere = kFiles - shares["n1"];
  ASSERT_GT(shares["n2"], 0);
  ASSERT_GT(shares["n3"], 0);
  const double source_reads = Metric(0, "granary_source_reads_total");
  const double hits = Metric(0, "granary_cache_hits_total");
  const double misses = Metric(0, "granary_cache_misses_total");

  ReadAllOnFirstNode("ds");
  EXPECT_EQ(Metric(0, "granary_source_reads_total"), source_reads);
  EXPECT_EQ(Metric(0, "granary_peer_copies_total"), elsewhere);
  EXPECT_EQ(Metric(0, "granary_cache_misses_total") - misses, elsewhere);
  EXPECT_EQ(Metric(0, "granary_cache_hits_total") - hits, shares["n1"]);

  // Stored on n1 as they came: the next epoch reads nothing from anyone.
  ReadAllOnFirstNode("ds");
  EXPECT_EQ(Metric(0, "granary_peer_copies_total"), elsewhere);
  EXPECT_EQ(Metric(0, "granary_cache_misses_total") - misses, elsewhere);
  EXPECT_EQ(Metric(0, "granary_cache_hits_total") - hits, kFiles + shares["n1"]);
}

TEST_F(BatchReadClusterTest, AColdBatchWithAKilledOwnerReadsItsShareFromTheSource) {
  Register("cold");
  std::map<std::string, int> shares = Shares("cold");
  ASSERT_GT(shares["n2"], 0);
  ASSERT_TRUE(cluster_->node(1).Kill().ok());

  ReadAllOnFirstNode("cold");
  // n1 read its own share and n2's from the source, and asked n3 for its
  // share, which n3 read from the source.
  EXPECT_EQ(Metric(0, "granary_source_reads_total"), shares["n1"] + shares["n2"]);
  EXPECT_EQ(Metric(0, "granary_peer_copies_total"), shares["n3"]);
  EXPECT_EQ(Metric(2, "granary_source_reads_total"), shares["n3"]);
  EXPECT_EQ(Metric(0, "granary_cache_misses_total"), kFiles);
}

}  // namespace
}  // namespace granary::testing
