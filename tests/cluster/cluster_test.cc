// Four real granaryd nodes on loopback in two cache groups, with static
// membership (a members file) and with etcd: the catalog on every node,
// chunks where the ring puts them, group prewarm reading the source once per
// chunk, a second group warming from the first, a miss on a node that is not
// the owner read through the owner, a cold read filling each node's share of
// its group, cold parts of chunks costing the source their blocks once and
// copied by the other group, two replicas per group, reads surviving a
// dead node, a lease expiry removing a node, a joining node receiving the
// catalog, and a stopped peer holding no registration.
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <map>
#include <optional>
#include <thread>

#include "cache_server/read_path/fetch_speeds.h"
#include "client/chunk_reads.h"
#include "client/chunk_router.h"
#include "client/dataset_client.h"
#include "common/base/status.h"
#include "grpcpp/client_context.h"
#include "tests/server/server_test_util.h"
#include "tests/support/etcd_process.h"
#include "tests/support/granary_cluster.h"

namespace granary {
namespace {

using testing::AddDataset;
using testing::PatternBytes;

using testing::ClusterNode;
using testing::GranaryCluster;
using testing::TempDir;

constexpr uint32_t kChunkSize = 1 << 20;
constexpr int kFiles = 16;
constexpr size_t kFileSize = 5 * kChunkSize / 2;  // Three chunks, the last one half full.
constexpr int kChunks = kFiles * 3;
const std::vector<ClusterNode> kFourNodes = {
    {"a1", "rack-a"}, {"a2", "rack-a"}, {"b1", "rack-b"}, {"b2", "rack-b"}};

std::string FileBytes(int file) { return PatternBytes(kFileSize, file); }

// The first chunk of a file (whole: kChunkSize bytes) that `owner` owns in
// `group` by the ring, and the file's number; nullopt if `owner` owns none.
std::optional<std::pair<ChunkKey, int>> FirstChunkOwnedBy(const Manifest& manifest,
                                                          const ClusterMap& map,
                                                          const std::string& group,
                                                          const std::string& owner) {
  for (int file = 0; file < kFiles; ++file) {
    ChunkKey key{manifest.version(), *manifest.Find("file" + std::to_string(file)), 0};
    if (map.Owners(key, group, 1).front()->id == owner) return std::pair(key, file);
  }
  return std::nullopt;
}

double Metric(testing::GranarydProcess& node, std::string_view name) {
  auto value = node.Metric(name);
  EXPECT_TRUE(value.ok()) << value.status();
  return value.value_or(-1);
}

class ClusterTest : public ::testing::Test {
 protected:
  void StartCluster(std::string etcd_endpoint, uint32_t replicas = 1,
                    std::vector<std::string> extra_args = {}) {
    for (int file = 0; file < kFiles; ++file) {
      std::ofstream(source_.path() + "/file" + std::to_string(file)) << FileBytes(file);
    }
    auto cluster = GranaryCluster::StartFormed(
        {.nodes = kFourNodes, .etcd_endpoint = etcd_endpoint, .extra_args = extra_args});
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = *std::move(cluster);
    ASSERT_TRUE(AddDataset(cluster_->node(0).SocketStub().get(), "images", source_.path(),
                           kChunkSize, &info_, replicas)
                    .ok());
  }

  // The dataset as node `i` lists it; NOT_FOUND if it does not.
  absl::StatusOr<v1::DatasetInfo> DatasetOn(size_t i, const std::string& name = "images") {
    auto client = DatasetClient::Connect(cluster_->node(i).socket_address());
    GRANARY_ASSIGN_OR_RETURN(std::vector<v1::DatasetInfo> datasets, (*client)->ListDatasets());
    for (const v1::DatasetInfo& dataset : datasets) {
      if (dataset.name() == name) return dataset;
    }
    return absl::NotFoundError("no dataset '" + name + "'");
  }

  // Prewarms cache group `group` through node `via`, once `via` has the
  // registration (it waits for peers kPushWait at most, so a loaded peer may
  // get it later); returns the last progress.
  v1::PrewarmProgress Prewarm(size_t via, const std::string& group) {
    EXPECT_TRUE(cluster_->WaitForDataset(via, "images").ok())
        << "node " << via << " never got 'images'";
    v1::PrewarmRequest request;
    request.set_name("images");
    request.set_group(group);
    std::vector<v1::PrewarmProgress> progress;
    grpc::Status finished =
        testing::Prewarm(cluster_->node(via).SocketStub().get(), request, &progress);
    EXPECT_TRUE(finished.ok()) << finished.error_message();
    return progress.empty() ? v1::PrewarmProgress() : progress.back();
  }

  // Registers the source through a1 as dataset `name`, filled as `fill`
  // says, and waits until every node lists it.
  void AddOnEveryNode(const std::string& name, v1::FillPolicy fill, v1::DatasetInfo* info) {
    v1::AddDatasetRequest add;
    add.set_name(name);
    add.set_source(source_.path());
    add.set_chunk_size(kChunkSize);
    add.set_fill(fill);
    grpc::ClientContext context;
    ASSERT_TRUE(cluster_->node(0).SocketStub()->AddDataset(&context, add, info).ok());
    for (size_t i = 0; i < cluster_->size(); ++i) {
      ASSERT_TRUE(cluster_->WaitForDataset(i, name).ok()) << cluster_->spec(i).id;
    }
  }

  DatasetSnapshot Snapshot() {
    auto client = DatasetClient::Connect(cluster_->node(0).socket_address());
    auto snapshot = (*client)->GetManifest("images");
    EXPECT_TRUE(snapshot.ok()) << snapshot.status();
    return *std::move(snapshot);
  }

  // How many chunks each member owns in `group`, by the ring.
  std::map<std::string, int> PredictedOwners(const std::string& group) {
    return testing::ChunksPerOwner(Snapshot().manifest, **ClusterMap::Build(cluster_->Members()),
                                   group);
  }

  // Reads in group `group` as a client on node `local` does.
  std::unique_ptr<ChunkRouter> RouterOn(size_t local) {
    ChunkRouter::Options options;
    options.group = cluster_->spec(local).group;
    options.local_node_id = cluster_->spec(local).id;
    options.local_address = cluster_->node(local).socket_address();
    options.client.read_timeout = std::chrono::seconds(5);
    return std::make_unique<ChunkRouter>(options, *ClusterMap::Build(cluster_->Members()));
  }

  // Reads every file through `router` and checks every byte.
  void ReadAllThrough(ChunkRouter& router) {
    DatasetSnapshot snapshot = Snapshot();
    for (int file = 0; file < kFiles; ++file) {
      auto id = snapshot.manifest.Find("file" + std::to_string(file));
      std::string buffer(kFileSize, '\0');
      auto read = ReadFileThroughChunks(
          snapshot.manifest, *id, 0, std::span<char>(buffer.data(), buffer.size()),
          [&](const ChunkKey& key, uint32_t offset, std::span<char> out) {
            return router.ReadFromOwners(key, offset, out);
          });
      ASSERT_TRUE(read.ok()) << read.status();
      ASSERT_TRUE(buffer == FileBytes(file)) << "file" << file;
    }
  }

  TempDir source_;
  std::unique_ptr<GranaryCluster> cluster_;
  v1::DatasetInfo info_;
};

class StaticClusterTest : public ClusterTest {
 protected:
  void SetUp() override { StartCluster(""); }
};

TEST_F(StaticClusterTest, ADatasetRegisteredOnOneNodeIsOnEveryNode) {
  for (size_t i = 0; i < cluster_->size(); ++i) {
    auto dataset = cluster_->WaitForDataset(i, "images");
    ASSERT_TRUE(dataset.ok()) << cluster_->spec(i).id << ": " << dataset.status() << "\n"
                              << cluster_->node(i).log();
    EXPECT_EQ(dataset->version(), info_.version());
  }
}

TEST_F(StaticClusterTest, GroupPrewarmReadsEachChunkOnceByItsOwnerAndTheOtherGroupCopiesIt) {
  // Asked of a node in the other group, which coordinates without fetching.
  v1::PrewarmProgress rack_a = Prewarm(2, "rack-a");
  EXPECT_TRUE(rack_a.finished());
  EXPECT_EQ(rack_a.nodes(), 2u);
  EXPECT_EQ(rack_a.chunks_total(), static_cast<uint64_t>(kChunks));
  EXPECT_EQ(rack_a.chunks_done(), static_cast<uint64_t>(kChunks));
  EXPECT_EQ(rack_a.failures_size(), 0);
  std::map<std::string, int> owned = PredictedOwners("rack-a");
  EXPECT_EQ(Metric(cluster_->node(0), "granary_source_reads_total"), owned["a1"]);
  EXPECT_EQ(Metric(cluster_->node(1), "granary_source_reads_total"), owned["a2"]);
  EXPECT_EQ(Metric(cluster_->node(2), "granary_source_reads_total"), 0);
  EXPECT_EQ(Metric(cluster_->node(3), "granary_source_reads_total"), 0);

  v1::PrewarmProgress rack_b = Prewarm(0, "rack-b");
  EXPECT_EQ(rack_b.chunks_done(), static_cast<uint64_t>(kChunks));
  // Each rack-b owner copies its share from rack-a while peers have not been
  // measured slower than the source, which needs a source read to measure:
  // the probe its kProbeInterval-th miss makes. From then on this loopback's
  // source, faster than a peer copy, may fill the rest.
  std::map<std::string, int> owned_b = PredictedOwners("rack-b");
  for (size_t i : {2, 3}) {
    const std::string& id = cluster_->spec(i).id;
    const int owned_here = owned_b[id];
    const double source_reads = Metric(cluster_->node(i), "granary_source_reads_total");
    const double copies = Metric(cluster_->node(i), "granary_peer_copies_total");
    EXPECT_EQ(Metric(cluster_->node(i), "granary_peer_copy_errors_total"), 0)
        << id << "'s log:\n"
        << cluster_->node(i).log();
    EXPECT_EQ(source_reads + copies, owned_here) << id;
    EXPECT_GE(copies, std::min<int>(owned_here, FetchSpeeds::kProbeInterval - 1))
        << id << " owns " << owned_here << " chunks and read " << source_reads
        << " of them from the source; its log:\n"
        << cluster_->node(i).log();
  }

  grpc::ClientContext context;
  v1::LocateRequest request;
  request.set_name("images");
  request.set_fresh(true);
  v1::LocateResponse located;
  ASSERT_TRUE(cluster_->node(3).SocketStub()->Locate(&context, request, &located).ok());
  EXPECT_EQ(located.nodes_size(), 4);
  ASSERT_EQ(located.groups_size(), 2);
  for (const v1::GroupLocality& group : located.groups()) {
    EXPECT_DOUBLE_EQ(group.fraction(), 1.0) << group.group();
  }
}

TEST_F(StaticClusterTest, AJoiningNodeCopiesItsShareFromTheOldOwners) {
  Prewarm(0, "rack-a");
  auto joined = cluster_->AddNode({"a3", "rack-a"});
  ASSERT_TRUE(joined.ok()) << joined.status();
  for (size_t i = 0; i < cluster_->size(); ++i) {
    ASSERT_TRUE(cluster_->WaitForMembers(i, {"a1", "a2", "a3", "b1", "b2"}).ok());
  }
  ASSERT_TRUE(cluster_->WaitForDataset(*joined, "images").ok());
  v1::PrewarmProgress again = Prewarm(0, "rack-a");
  EXPECT_EQ(again.nodes(), 3u) << "the coordinator's log:\n"
                               << cluster_->node(0).log() << "\nthe joining node's log:\n"
                               << cluster_->node(*joined).log();
  EXPECT_EQ(again.chunks_done(), static_cast<uint64_t>(kChunks));
  std::map<std::string, int> owned = PredictedOwners("rack-a");
  ASSERT_GT(owned["a3"], 0);
  testing::GranarydProcess& a3 = cluster_->node(*joined);
  EXPECT_EQ(Metric(a3, "granary_source_reads_total"), 0);
  EXPECT_EQ(Metric(a3, "granary_peer_copies_total"), owned["a3"]);
}

TEST_F(StaticClusterTest, StatusListsEveryMemberAndReportsADeadOne) {
  ASSERT_TRUE(cluster_->node(3).Kill().ok());
  grpc::ClientContext context;
  v1::StatusResponse status;
  ASSERT_TRUE(cluster_->node(0).SocketStub()->Status(&context, {}, &status).ok());
  ASSERT_EQ(status.nodes_size(), 4);
  std::map<std::string, std::pair<std::string, std::string>> seen;
  for (const v1::NodeStatus& node : status.nodes()) {
    seen[node.node_id()] = {node.group(), node.state()};
  }
  EXPECT_EQ(seen["a1"], (std::pair<std::string, std::string>("rack-a", "up")));
  EXPECT_EQ(seen["b1"], (std::pair<std::string, std::string>("rack-b", "up")));
  EXPECT_EQ(seen["b2"].second, "unreachable");

  // The dead peer refuses connections: Locate leaves it out at once rather
  // than waiting out the peers' answer time for it (it used to, every call).
  const auto started = std::chrono::steady_clock::now();
  grpc::ClientContext locating;
  v1::LocateRequest request;
  request.set_name("images");
  request.set_fresh(true);
  v1::LocateResponse located;
  ASSERT_TRUE(cluster_->node(0).SocketStub()->Locate(&locating, request, &located).ok());
  const auto waited = std::chrono::steady_clock::now() - started;
  EXPECT_EQ(located.nodes_size(), 3);
  // A bound well short of the 3 s wait, not a timing.
  EXPECT_LT(waited, std::chrono::seconds(2));

  // Back: found up at once, though a1's channel to it failed moments ago.
  ASSERT_TRUE(cluster_->node(3).Restart().ok());
  grpc::ClientContext again;
  v1::StatusResponse restarted;
  ASSERT_TRUE(cluster_->node(0).SocketStub()->Status(&again, {}, &restarted).ok());
  for (const v1::NodeStatus& node : restarted.nodes()) {
    EXPECT_EQ(node.state(), "up") << node.node_id();
  }
}

TEST_F(StaticClusterTest, RoutedReadsSurviveAKilledOwnerWithNoWrongByte) {
  std::unique_ptr<ChunkRouter> router = RouterOn(0);
  ReadAllThrough(*router);
  ASSERT_TRUE(cluster_->node(1).Kill().ok());
  ReadAllThrough(*router);
  ASSERT_TRUE(cluster_->node(1).Restart().ok());
  ReadAllThrough(*router);
}

TEST_F(StaticClusterTest, AMissOnANodeThatIsNotTheOwnerIsReadThroughTheOwner) {
  DatasetSnapshot snapshot = Snapshot();
  std::shared_ptr<const ClusterMap> map = *ClusterMap::Build(cluster_->Members());
  const auto owned_by_a2 = FirstChunkOwnedBy(snapshot.manifest, *map, "rack-a", "a2");
  ASSERT_TRUE(owned_by_a2.has_value());
  auto a1 = DatasetClient::Connect(cluster_->node(0).socket_address());
  std::string data(kChunkSize, '\0');
  ASSERT_TRUE((*a1)->ReadChunk(owned_by_a2->first, 0, data).ok());
  EXPECT_TRUE(data == FileBytes(owned_by_a2->second).substr(0, kChunkSize));
  EXPECT_EQ(Metric(cluster_->node(0), "granary_source_reads_total"), 0);
  EXPECT_EQ(Metric(cluster_->node(0), "granary_peer_copies_total"), 1);
  EXPECT_EQ(Metric(cluster_->node(1), "granary_source_reads_total"), 1);
  auto a2 = DatasetClient::Connect(cluster_->node(1).socket_address());
  EXPECT_TRUE((*a2)->ReadChunk(owned_by_a2->first, 0, data, ChunkSourcing::kCacheOnly).ok());
}

// A dataset filled on read, read cold once through a1 (a chunk a2 owns): a1
// asks a2, and each node of rack-a, having seen a miss, fills its own share
// from the source, every chunk read once in the group; rack-b, where nobody
// read, reads nothing.
TEST_F(StaticClusterTest, AColdReadHasEachNodeOfTheGroupFillItsOwnShareOnce) {
  v1::DatasetInfo filled;
  ASSERT_NO_FATAL_FAILURE(AddOnEveryNode("filled", v1::FILL_ON_READ, &filled));
  auto a1 = DatasetClient::Connect(cluster_->node(0).socket_address());
  DatasetSnapshot snapshot = *(*a1)->GetManifest("filled");
  std::shared_ptr<const ClusterMap> map = *ClusterMap::Build(cluster_->Members());
  const std::map<std::string, int> shares =
      testing::ChunksPerOwner(snapshot.manifest, *map, "rack-a");
  const auto owned_by_a2 = FirstChunkOwnedBy(snapshot.manifest, *map, "rack-a", "a2");
  ASSERT_TRUE(owned_by_a2.has_value());
  std::string data(kChunkSize, '\0');
  ASSERT_TRUE((*a1)->ReadChunk(owned_by_a2->first, 0, data).ok());
  EXPECT_TRUE(data == FileBytes(owned_by_a2->second).substr(0, kChunkSize));

  // Each node then holds its share (a1 also the chunk it copied from a2, so
  // its count reaches its share one chunk early: the source reads say when
  // both fills are done). Polled through metrics: a read of the version, even
  // from the cache, would hold the fills back.
  auto share_held = [&](size_t i) {
    const auto share = shares.find(cluster_->spec(i).id);
    return Metric(cluster_->node(i), "granary_store_chunks") >=
           (share == shares.end() ? 0 : share->second);
  };
  auto source_reads = [&] {
    return Metric(cluster_->node(0), "granary_source_reads_total") +
           Metric(cluster_->node(1), "granary_source_reads_total");
  };
  bool filled_rack_a = false;
  for (int poll = 0; poll < 300 && !filled_rack_a; ++poll) {
    if (poll > 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    filled_rack_a = source_reads() >= kChunks && share_held(0) && share_held(1);
  }
  EXPECT_TRUE(filled_rack_a) << "a1 holds " << Metric(cluster_->node(0), "granary_store_chunks")
                             << ", a2 " << Metric(cluster_->node(1), "granary_store_chunks")
                             << "; rack-a read " << source_reads() << " chunks from the source";
  auto a2 = DatasetClient::Connect(cluster_->node(1).socket_address());
  for (int f = 0; f < kFiles; ++f) {
    const uint64_t id = *snapshot.manifest.Find("file" + std::to_string(f));
    for (uint32_t index = 0; index < 3; ++index) {
      const ChunkKey key{filled.version(), id, index};
      const bool on_a2 = map->Owners(key, "rack-a", 1).front()->id == "a2";
      std::string chunk(std::min<size_t>(kChunkSize, kFileSize - index * kChunkSize), '\0');
      EXPECT_TRUE((on_a2 ? *a2 : *a1)->ReadChunk(key, 0, chunk, ChunkSourcing::kCacheOnly).ok())
          << "file" << f << " chunk " << index << " is not at its owner";
    }
  }
  EXPECT_EQ(source_reads(), kChunks);
  for (size_t i : {2, 3}) {
    EXPECT_EQ(Metric(cluster_->node(i), "granary_source_reads_total"), 0) << cluster_->spec(i).id;
    EXPECT_EQ(Metric(cluster_->node(i), "granary_store_chunks"), 0) << cluster_->spec(i).id;
  }
}

// Reads of 64 KiB at unaligned offsets, one in the first chunk of each file,
// asked of a node that owns none of some: each owner fetches the 17 disk
// blocks covering its reads (a second owner and the other group's owner hold
// nothing yet), and a node of the other group then copies the same blocks
// from them instead of reading the source.
TEST_F(StaticClusterTest, ColdPartsOfChunksCostTheSourceTheirBlocksOnceAndTheOtherGroupCopiesThem) {
  v1::DatasetInfo parts;
  ASSERT_NO_FATAL_FAILURE(AddOnEveryNode("parts", v1::FILL_NONE, &parts));
  auto a1 = DatasetClient::Connect(cluster_->node(0).socket_address());
  auto b1 = DatasetClient::Connect(cluster_->node(2).socket_address());
  const Manifest manifest = (*a1)->GetManifest("parts")->manifest;
  constexpr uint32_t kOffset = 1000;
  constexpr uint32_t kRead = 64 << 10;
  constexpr double kBlocksPerRead = 17;
  auto read_every_file = [&](const DatasetClient& node) {
    for (int file = 0; file < kFiles; ++file) {
      const ChunkKey key{parts.version(), *manifest.Find("file" + std::to_string(file)), 0};
      std::string data(kRead, '\0');
      ASSERT_TRUE(node.ReadChunk(key, kOffset, data).ok()) << "file" << file;
      ASSERT_TRUE(data == FileBytes(file).substr(kOffset, kRead)) << "file" << file;
    }
  };
  auto source_bytes = [&](std::vector<size_t> nodes) {
    double bytes = 0;
    for (size_t i : nodes) bytes += Metric(cluster_->node(i), "granary_bytes_from_source_total");
    return bytes;
  };
  read_every_file(**a1);
  EXPECT_EQ(source_bytes({0, 1}), kFiles * kBlocksPerRead * 4096);
  read_every_file(**b1);
  EXPECT_EQ(source_bytes({2, 3}), 0);
  EXPECT_EQ(source_bytes({0, 1}), kFiles * kBlocksPerRead * 4096);
}

// Locate without `fresh` reads the reports the nodes gossip (LocalityBoard),
// here every 200 ms, a report counting for at most kMaxAgeSeconds.
class PublishedLocalityTest : public ClusterTest {
 protected:
  static constexpr int kMaxAgeSeconds = 4;
  void SetUp() override {
    StartCluster("", 1,
                 {"--locality-period-ms", "200", "--locality-max-age-seconds",
                  std::to_string(kMaxAgeSeconds)});
  }

  v1::LocateResponse PublishedOn(size_t i) {
    grpc::ClientContext context;
    v1::LocateRequest request;
    request.set_name("images");
    v1::LocateResponse located;
    grpc::Status status = cluster_->node(i).SocketStub()->Locate(&context, request, &located);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return located;
  }

  static std::map<std::string, const v1::NodeLocality*> ByNode(const v1::LocateResponse& located) {
    std::map<std::string, const v1::NodeLocality*> nodes;
    for (const v1::NodeLocality& node : located.nodes()) nodes[node.node_id()] = &node;
    return nodes;
  }
};

TEST_F(PublishedLocalityTest, LocateReadsWhatEveryNodePublishedWithItsAge) {
  Prewarm(2, "rack-a");
  absl::Status published = cluster_->WaitForPublishedLocality(3, "images");
  ASSERT_TRUE(published.ok()) << published;
  v1::LocateResponse located = PublishedOn(3);
  ASSERT_EQ(located.nodes_size(), 4);
  for (const v1::GroupLocality& group : located.groups()) {
    EXPECT_DOUBLE_EQ(group.fraction(), group.group() == "rack-a" ? 1.0 : 0.0) << group.group();
  }
  std::map<std::string, int> owned = PredictedOwners("rack-a");
  for (const v1::NodeLocality& node : located.nodes()) {
    if (node.node_id() == "b2") {
      EXPECT_EQ(node.age_ms(), 0) << "the answering node's own figures are current";
    } else {
      EXPECT_GE(node.age_ms(), 0) << node.node_id();
      EXPECT_LE(node.age_ms(), kMaxAgeSeconds * 1000) << node.node_id();
    }
    EXPECT_EQ(node.cached_bytes() > 0, owned[node.node_id()] > 0) << node.node_id();
  }
}

// A stopped node holds its connections open and answers nothing: a fresh
// Locate waits for it, a published one asks nobody. Once its last report is
// older than the maximum age it is left out, and it is back when it
// publishes again.
TEST_F(PublishedLocalityTest, AStoppedNodeCostsLocateNothingAndIsLeftOutOnceItsReportIsOld) {
  Prewarm(0, "rack-a");
  ASSERT_TRUE(cluster_->WaitForPublishedLocality(3, "images").ok());
  const uint64_t a2_bytes = ByNode(PublishedOn(3)).at("a2")->cached_bytes();
  ASSERT_GT(a2_bytes, 0u);
  ASSERT_EQ(kill(cluster_->node(1).pid(), SIGSTOP), 0);
  const auto started = std::chrono::steady_clock::now();
  v1::LocateResponse located = PublishedOn(3);
  const auto waited = std::chrono::steady_clock::now() - started;
  // A bound far short of the 3 s a fresh answer waits for a silent peer.
  EXPECT_LT(waited, std::chrono::seconds(1));
  EXPECT_EQ(located.nodes_size(), 4);

  for (int attempt = 0; attempt < 100 && ByNode(located).contains("a2"); ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    located = PublishedOn(3);
  }
  ASSERT_EQ(kill(cluster_->node(1).pid(), SIGCONT), 0);
  EXPECT_FALSE(ByNode(located).contains("a2"));
  for (const v1::GroupLocality& group : located.groups()) {
    if (group.group() == "rack-a") {
      EXPECT_LT(group.fraction(), 1.0);
    }
  }

  ASSERT_TRUE(cluster_->WaitForPublishedLocality(3, "images").ok());
  EXPECT_EQ(ByNode(PublishedOn(3)).at("a2")->cached_bytes(), a2_bytes);
}

class ReplicatedClusterTest : public ClusterTest {
 protected:
  void SetUp() override { StartCluster("", 2); }
};

TEST_F(ReplicatedClusterTest, EveryChunkIsOnTwoNodesOfTheGroupAndReadFromTheSourceOnce) {
  EXPECT_EQ(info_.replicas(), 2u);
  v1::PrewarmProgress rack_a = Prewarm(2, "rack-a");
  EXPECT_TRUE(rack_a.finished());
  EXPECT_EQ(rack_a.failures_size(), 0);
  EXPECT_EQ(rack_a.chunks_total(), 2u * kChunks);
  EXPECT_EQ(rack_a.chunks_done(), 2u * kChunks);
  // Each chunk's owner read it from the source; its replica fetched it
  // through the owner.
  std::map<std::string, int> owned = PredictedOwners("rack-a");
  EXPECT_EQ(Metric(cluster_->node(0), "granary_source_reads_total"), owned["a1"]);
  EXPECT_EQ(Metric(cluster_->node(1), "granary_source_reads_total"), owned["a2"]);
  EXPECT_EQ(Metric(cluster_->node(0), "granary_peer_copies_total"), owned["a2"]);
  EXPECT_EQ(Metric(cluster_->node(1), "granary_peer_copies_total"), owned["a1"]);

  grpc::ClientContext context;
  v1::LocateRequest request;
  request.set_name("images");
  request.set_fresh(true);
  v1::LocateResponse located;
  ASSERT_TRUE(cluster_->node(3).SocketStub()->Locate(&context, request, &located).ok());
  EXPECT_EQ(located.replicas(), 2u);
  for (const v1::NodeLocality& node : located.nodes()) {
    EXPECT_DOUBLE_EQ(node.node_fraction(), node.group() == "rack-a" ? 1.0 : 0.0) << node.node_id();
    EXPECT_DOUBLE_EQ(node.group_fraction(), node.group() == "rack-a" ? 1.0 : 0.0) << node.node_id();
  }

  // With a2 dead, its chunks come from their replica on a1, not the source.
  ASSERT_TRUE(cluster_->node(1).Kill().ok());
  std::unique_ptr<ChunkRouter> router = RouterOn(0);
  ReadAllThrough(*router);
  EXPECT_EQ(Metric(cluster_->node(0), "granary_source_reads_total"), owned["a1"]);
}

TEST_F(StaticClusterTest, TheCatalogSurvivesANodeAndReachesAJoiningOne) {
  ASSERT_TRUE(cluster_->node(0).Kill().ok());
  auto joined = cluster_->AddNode({"a3", "rack-a"});
  ASSERT_TRUE(joined.ok()) << joined.status();
  auto dataset = cluster_->WaitForDataset(*joined, "images");
  ASSERT_TRUE(dataset.ok()) << dataset.status() << "\n" << cluster_->node(*joined).log();
  EXPECT_EQ(dataset->version(), info_.version());

  // Removed while a1 is down: a1 learns it when it comes back. Every live
  // node lists a3 first (they reread the members file on their own
  // schedule), so that the removal is pushed to it before RemoveDataset
  // answers.
  for (size_t i : {1, 2, 3}) {
    absl::Status listed = cluster_->WaitForMembers(i, {"a1", "a2", "a3", "b1", "b2"});
    ASSERT_TRUE(listed.ok()) << listed;
  }
  grpc::ClientContext context;
  v1::RemoveDatasetRequest remove;
  remove.set_name("images");
  v1::RemoveDatasetResponse removed;
  ASSERT_TRUE(cluster_->node(2).SocketStub()->RemoveDataset(&context, remove, &removed).ok());
  for (size_t i : {1, 3, 4}) {
    EXPECT_EQ(DatasetOn(i).status().code(), absl::StatusCode::kNotFound) << cluster_->spec(i).id;
  }
  absl::Status restarted = cluster_->node(0).Restart();
  ASSERT_TRUE(restarted.ok()) << restarted << "\n" << cluster_->node(0).log();
  absl::StatusCode after_restart = absl::StatusCode::kOk;
  for (int attempt = 0; attempt < 100 && after_restart == absl::StatusCode::kOk; ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    after_restart = DatasetOn(0).status().code();
  }
  EXPECT_EQ(after_restart, absl::StatusCode::kNotFound);
}

// A peer that is stopped keeps its connections open and answers nothing: a
// registration must not wait on it (it used to, for the exchange's whole
// 120 s deadline), and the peer gets the change once it runs again.
TEST_F(StaticClusterTest, ARegistrationDoesNotWaitOnAStoppedPeerWhichGetsItOnWaking) {
  ASSERT_EQ(kill(cluster_->node(1).pid(), SIGSTOP), 0);
  const auto started = std::chrono::steady_clock::now();
  v1::DatasetInfo second;
  grpc::Status added = AddDataset(cluster_->node(0).SocketStub().get(), "second", source_.path(),
                                  kChunkSize, &second);
  const auto waited = std::chrono::steady_clock::now() - started;
  ASSERT_EQ(kill(cluster_->node(1).pid(), SIGCONT), 0);
  ASSERT_TRUE(added.ok()) << added.error_message();
  // A bound far from the 120 s the registration used to wait, not a timing.
  EXPECT_LT(waited, std::chrono::seconds(30));
  for (size_t i : {1, 2, 3}) {
    auto dataset = cluster_->WaitForDataset(i, "second");
    ASSERT_TRUE(dataset.ok()) << cluster_->spec(i).id << ": " << dataset.status() << "\n"
                              << cluster_->node(i).log();
    EXPECT_EQ(dataset->version(), second.version());
  }
}

// A peer that was down is retried with a growing backoff, and a registration
// does not wait on a peer in backoff. Once the peer is back and has called
// this node (its own exchanges at start), it is alive: the next registration
// reaches it before answering, not at the retry seconds later.
TEST_F(StaticClusterTest, APeerBackFromDownGetsTheNextRegistrationWithoutWaitingOutItsBackoff) {
  ASSERT_TRUE(cluster_->node(3).Kill().ok());
  v1::DatasetInfo second;
  grpc::Status added = AddDataset(cluster_->node(0).SocketStub().get(), "second", source_.path(),
                                  kChunkSize, &second);
  ASSERT_TRUE(added.ok()) << added.error_message();
  // Each push to the dead b2 fails after its 3 s connection timeout: at
  // about 3, 7, 12 and 19 s, with backoffs of 1, 2, 4 and 8 s, so a1's next
  // retry of b2 comes about 7 s after it is back.
  std::this_thread::sleep_for(std::chrono::seconds(20));
  absl::Status restarted = cluster_->node(3).Restart();
  ASSERT_TRUE(restarted.ok()) << restarted << "\n" << cluster_->node(3).log();
  v1::DatasetInfo third;
  added =
      AddDataset(cluster_->node(0).SocketStub().get(), "third", source_.path(), kChunkSize, &third);
  ASSERT_TRUE(added.ok()) << added.error_message();
  // Within a1's reconnection to b2 (at most 2 s), well before that retry.
  absl::StatusOr<v1::DatasetInfo> on_b2 =
      cluster_->WaitForDataset(3, "third", 0, std::chrono::milliseconds(4100));
  ASSERT_TRUE(on_b2.ok()) << on_b2.status() << "\n" << cluster_->node(0).log();
  EXPECT_EQ(on_b2->version(), third.version());
}

class EtcdClusterTest : public ClusterTest {
 protected:
  void SetUp() override {
    auto etcd = testing::EtcdProcess::Start();
    ASSERT_TRUE(etcd.ok()) << etcd.status();
    etcd_ = *std::move(etcd);
    StartCluster(etcd_->endpoint());
  }

  std::unique_ptr<testing::EtcdProcess> etcd_;
};

TEST_F(EtcdClusterTest, ALeaseExpiryRemovesANodeAndAJoiningNodeGetsTheCatalog) {
  ASSERT_TRUE(cluster_->node(3).Kill().ok());
  for (size_t i = 0; i < 3; ++i) {
    absl::Status left = cluster_->WaitForMembers(i, {"a1", "a2", "b1"});
    EXPECT_TRUE(left.ok()) << left;
  }
  auto joined = cluster_->AddNode({"b3", "rack-b"});
  ASSERT_TRUE(joined.ok()) << joined.status();
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_TRUE(cluster_->WaitForMembers(i, {"a1", "a2", "b1", "b3"}).ok());
  }
  auto dataset = cluster_->WaitForDataset(*joined, "images");
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  EXPECT_EQ(dataset->version(), info_.version());

  v1::PrewarmProgress rack_b = Prewarm(0, "rack-b");
  EXPECT_EQ(rack_b.nodes(), 2u);
  EXPECT_EQ(rack_b.chunks_done(), static_cast<uint64_t>(kChunks));
}

}  // namespace
}  // namespace granary
