// MemberWatcher and ClusterReader against real granaryd nodes: a server that
// cannot list its members leaves the reader on it alone, the cluster is
// picked up once the server answers, chunks then come from their ring
// owners, and a joining member reaches the reader without a restart.
#include "client/member_watcher.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <map>
#include <thread>

#include "client/cluster_reader.h"
#include "client/dataset_client.h"
#include "grpcpp/client_context.h"
#include "tests/server/server_test_util.h"
#include "tests/support/granary_cluster.h"

namespace granary {
namespace {

using testing::PatternBytes;
using testing::ServerWithoutMethods;

using testing::ClusterNode;
using testing::GranaryCluster;
using testing::TempDir;

constexpr uint32_t kChunkSize = 1 << 20;
constexpr int kFiles = 6;
constexpr size_t kFileSize = 5 * kChunkSize / 2;  // Three chunks, the last one half full.

std::string FileBytes(int file) { return PatternBytes(kFileSize, file); }

std::vector<std::string> MemberIds(const MemberView& view) {
  std::vector<std::string> ids;
  for (const Member& member : view.members->members()) ids.push_back(member.id);
  return ids;
}

// Polls `condition` every 50 ms for up to `timeout`.
bool Eventually(const std::function<bool()>& condition,
                std::chrono::milliseconds timeout = std::chrono::seconds(15)) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return true;
}

// Asks every `interval`; RefreshSoon() at most every 100 ms.
MemberWatcher::Options Every(std::chrono::milliseconds interval) {
  return {.interval = interval, .min_refresh_interval = std::chrono::milliseconds(100)};
}

// Every view the watcher hands out, in order.
class ViewLog {
 public:
  MemberWatcher::Listener Listener() {
    return [this](const MemberView& view) {
      std::lock_guard<std::mutex> lock(mutex_);
      views_.push_back(view);
    };
  }
  std::vector<MemberView> views() {
    std::lock_guard<std::mutex> lock(mutex_);
    return views_;
  }

 private:
  std::mutex mutex_;
  std::vector<MemberView> views_;
};

TEST(MemberWatcherTest, AServerWithoutGetMembersLeavesTheReaderOnItAlone) {
  // A gRPC server that knows no Granary method answers UNIMPLEMENTED, as a
  // granaryd older than GetMembers does.
  TempDir dir;
  const std::string address = "unix:" + dir.path() + "/older.sock";
  ServerWithoutMethods server(address);
  ASSERT_TRUE(server.started());

  auto client = DatasetClient::Connect(address);
  ASSERT_TRUE(client.ok());
  ASSERT_EQ((*client)->GetMembers().status().code(), absl::StatusCode::kUnimplemented);
  ViewLog log;
  {
    constexpr std::chrono::milliseconds kInterval(50);
    MemberWatcher watcher(client->get(), Every(kInterval), log.Listener());
    ASSERT_EQ(log.views().size(), 1u);  // Before the constructor returns.
    // A view that must not come leaves nothing to poll for.
    std::this_thread::sleep_for(10 * kInterval);
  }
  // Asked again about ten times; the fallback view was handed out once.
  std::vector<MemberView> views = log.views();
  ASSERT_EQ(views.size(), 1u);
  EXPECT_EQ(views[0].self_id, address);
  EXPECT_EQ(views[0].group, kDefaultGroup);
  ASSERT_EQ(views[0].members->members().size(), 1u);
  EXPECT_EQ(views[0].members->members()[0].address, address);
}

TEST(MemberWatcherTest, AJoiningMemberReachesTheListenerAndNothingElseDoes) {
  auto cluster = GranaryCluster::Start(
      {.nodes = {{"a1", "rack-a"}, {"a2", "rack-a"}}, .etcd_endpoint = "", .extra_args = {}});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto client = DatasetClient::Connect((*cluster)->node(0).socket_address());
  ASSERT_TRUE(client.ok());
  ViewLog log;
  constexpr std::chrono::milliseconds kInterval(100);
  MemberWatcher watcher(client->get(), Every(kInterval), log.Listener());
  // Views that must not come leave nothing to poll for: five asks' time
  // proves none does, here and after a3 joins.
  std::this_thread::sleep_for(5 * kInterval);
  std::vector<MemberView> views = log.views();
  ASSERT_EQ(views.size(), 1u);
  EXPECT_EQ(views[0].self_id, "a1");
  EXPECT_EQ(views[0].group, "rack-a");
  EXPECT_EQ(MemberIds(views[0]), (std::vector<std::string>{"a1", "a2"}));

  ASSERT_TRUE((*cluster)->AddNode({"a3", "rack-a"}).ok());
  ASSERT_TRUE(Eventually([&] { return log.views().size() == 2; })) << (*cluster)->node(0).log();
  std::this_thread::sleep_for(5 * kInterval);
  views = log.views();
  ASSERT_EQ(views.size(), 2u);
  EXPECT_EQ(MemberIds(views[1]), (std::vector<std::string>{"a1", "a2", "a3"}));
  EXPECT_EQ(views[1].members->Find("a3")->address, (*cluster)->node(2).tcp_address());
}

TEST(MemberWatcherTest, RefreshSoonAsksBeforeTheInterval) {
  auto cluster =
      GranaryCluster::Start({.nodes = {{"a1", "rack-a"}}, .etcd_endpoint = "", .extra_args = {}});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto client = DatasetClient::Connect((*cluster)->node(0).socket_address());
  ASSERT_TRUE(client.ok());
  ViewLog log;
  MemberWatcher watcher(client->get(), Every(std::chrono::hours(1)), log.Listener());
  ASSERT_TRUE((*cluster)->AddNode({"a2", "rack-a"}).ok());
  ASSERT_TRUE((*cluster)->WaitForMembers(0, {"a1", "a2"}).ok());
  EXPECT_EQ(log.views().size(), 1u);
  watcher.RefreshSoon();
  ASSERT_TRUE(Eventually([&] { return log.views().size() == 2; }));
  EXPECT_EQ(MemberIds(log.views()[1]), (std::vector<std::string>{"a1", "a2"}));
}

// Two nodes in one group, a dataset registered on the first (the catalog
// reaches the second), read through a ClusterReader on the first node.
class ClusterReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int file = 0; file < kFiles; ++file) {
      std::ofstream(source_.path() + "/file" + std::to_string(file)) << FileBytes(file);
    }
    auto cluster = GranaryCluster::StartFormed(
        {.nodes = {{"a1", "rack-a"}, {"a2", "rack-a"}}, .etcd_endpoint = "", .extra_args = {}});
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = *std::move(cluster);
    absl::StatusOr<v1::DatasetInfo> registered =
        cluster_->RegisterDataset(0, "images", source_.path(), kChunkSize);
    ASSERT_TRUE(registered.ok()) << registered.status();
    auto client = DatasetClient::Connect(cluster_->node(0).socket_address());
    ASSERT_TRUE(client.ok());
    local_ = *std::move(client);
    auto snapshot = local_->GetManifest("images");
    ASSERT_TRUE(snapshot.ok()) << snapshot.status();
    snapshot_ = std::make_unique<DatasetSnapshot>(*std::move(snapshot));
  }

  void ReadAllAndVerify(ClusterReader& reader) {
    for (int file = 0; file < kFiles; ++file) {
      auto id = snapshot_->manifest.Find("file" + std::to_string(file));
      ASSERT_TRUE(id.has_value());
      std::string buffer(kFileSize, '\0');
      auto read =
          reader.ReadFile(*snapshot_, *id, 0, std::span<char>(buffer.data(), buffer.size()));
      ASSERT_TRUE(read.ok()) << read.status();
      ASSERT_EQ(*read, kFileSize);
      ASSERT_TRUE(buffer == FileBytes(file)) << "file" << file;
    }
  }

  // How many chunks of the dataset each member owns in rack-a.
  std::map<std::string, int> Owned() {
    return testing::ChunksPerOwner(snapshot_->manifest, **ClusterMap::Build(cluster_->Members()),
                                   "rack-a");
  }

  double SourceReads(size_t node) {
    auto reads = cluster_->node(node).Metric("granary_source_reads_total");
    EXPECT_TRUE(reads.ok()) << reads.status();
    return reads.value_or(-1);
  }

  TempDir source_;
  std::unique_ptr<GranaryCluster> cluster_;
  std::unique_ptr<DatasetClient> local_;
  std::unique_ptr<DatasetSnapshot> snapshot_;
};

TEST_F(ClusterReaderTest, EachChunkIsReadFromItsOwnerInTheReadersGroup) {
  ClusterReader reader(local_.get(), {.client = {}, .watch = {}});
  EXPECT_EQ(reader.view().self_id, "a1");
  EXPECT_EQ(reader.view().group, "rack-a");
  ReadAllAndVerify(reader);
  ReadAllAndVerify(reader);
  std::map<std::string, int> owned = Owned();
  ASSERT_GT(owned["a1"], 0);
  ASSERT_GT(owned["a2"], 0);
  EXPECT_EQ(SourceReads(0), owned["a1"]);
  EXPECT_EQ(SourceReads(1), owned["a2"]);
}

TEST_F(ClusterReaderTest, AServerDownAtStartIsReadAloneThenItsClusterIsPickedUp) {
  ASSERT_TRUE(cluster_->node(0).Kill().ok());
  ClusterReader reader(local_.get(),
                       {.client = {}, .watch = Every(std::chrono::milliseconds(200))});
  const std::string socket = cluster_->node(0).socket_address();
  EXPECT_EQ(reader.view().self_id, socket);
  EXPECT_EQ(MemberIds(reader.view()), std::vector<std::string>{socket});

  ASSERT_TRUE(cluster_->node(0).Restart().ok());
  ASSERT_TRUE(Eventually([&] { return reader.view().self_id == "a1"; }));
  EXPECT_EQ(MemberIds(reader.view()), (std::vector<std::string>{"a1", "a2"}));
  ReadAllAndVerify(reader);
  std::map<std::string, int> owned = Owned();
  EXPECT_EQ(SourceReads(0), owned["a1"]);
  EXPECT_EQ(SourceReads(1), owned["a2"]);
}

}  // namespace
}  // namespace granary
