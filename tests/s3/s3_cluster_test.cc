// Three real granaryd nodes on loopback in one cache group, reading one
// bucket of a real s3rver behind the SigV4 front end: a dataset registered
// from s3:// on one node is in every node's catalog, a group prewarm GETs
// each chunk from the bucket once, by the chunk's owner, and leaves each
// chunk on its owner, where Locate finds the dataset whole; a cold read
// through a node that is not the owner is GET by the owner alone; a refresh
// after an object is overwritten gives every node the new version.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/dataset_client.h"
#include "common/base/status.h"
#include "common/dataset/chunk_key.h"
#include "grpcpp/client_context.h"
#include "tests/server/server_test_util.h"
#include "tests/support/granary_cluster.h"
#include "tests/support/s3_test_endpoint.h"

namespace granary::testing {
namespace {

constexpr char kBucket[] = "data";
constexpr char kGroup[] = "rack-a";
constexpr uint32_t kChunkSize = 1 << 20;
constexpr int kFiles = 12;
constexpr uint32_t kChunksPerFile = 3;
constexpr size_t kFileSize = kChunksPerFile * kChunkSize;
constexpr int kChunks = kFiles * kChunksPerFile;

std::string FilePath(int file) { return absl::StrCat("part", file, ".bin"); }
std::string FileBytes(int file) { return PatternBytes(kFileSize, file); }

double Metric(GranarydProcess& node, std::string_view name) {
  absl::StatusOr<double> value = node.Metric(name);
  EXPECT_TRUE(value.ok()) << value.status();
  return value.value_or(-1);
}

class S3ClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s3 = StartVerifiedS3rver({kBucket});
    ASSERT_TRUE(s3.ok()) << s3.status();
    s3_ = *std::move(s3);
    for (int file = 0; file < kFiles; ++file) Put("train/" + FilePath(file), FileBytes(file));

    std::vector<ClusterNode> nodes;
    for (const char* id : {"n1", "n2", "n3"}) {
      ClusterNode node;
      node.id = id;
      node.group = kGroup;
      node.command_prefix = GranarydS3CommandPrefix(home_.path(), S3rverKeysEnvironment());
      nodes.push_back(std::move(node));
    }
    auto cluster = GranaryCluster::StartFormed(
        {.nodes = nodes, .etcd_endpoint = "", .extra_args = {"--s3-endpoint", endpoint()}});
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = *std::move(cluster);
    grpc::Status added = AddDataset(cluster_->node(0).SocketStub().get(), "train",
                                    S3SourceOf(kBucket, endpoint(), "train"), kChunkSize, &info_);
    ASSERT_TRUE(added.ok()) << added.error_message() << "\n" << cluster_->node(0).log();
  }

  std::string endpoint() const { return s3_.front->endpoint(); }

  void Put(const std::string& key, const std::string& bytes) {
    absl::Status put = s3_.s3rver->Put(kBucket, key, bytes);
    ASSERT_TRUE(put.ok()) << put;
  }

  std::unique_ptr<DatasetClient> ClientOf(size_t i) {
    auto client = DatasetClient::Connect(cluster_->node(i).socket_address());
    EXPECT_TRUE(client.ok()) << client.status();
    return *std::move(client);
  }

  DatasetSnapshot Snapshot(const std::string& name) {
    auto snapshot = ClientOf(0)->GetManifest(name);
    EXPECT_TRUE(snapshot.ok()) << snapshot.status();
    return *std::move(snapshot);
  }

  std::shared_ptr<const ClusterMap> Map() { return *ClusterMap::Build(cluster_->Members()); }

  // The index of the node that owns `key` by the ring.
  size_t OwnerOf(const ChunkKey& key) {
    const std::string owner = Map()->Owners(key, kGroup, 1).front()->id;
    for (size_t i = 0; i < cluster_->size(); ++i) {
      if (cluster_->spec(i).id == owner) return i;
    }
    ADD_FAILURE() << "no node " << owner;
    return 0;
  }

  // granary_source_reads_total of every node, by node index.
  std::vector<double> SourceReads() {
    std::vector<double> reads;
    for (size_t i = 0; i < cluster_->size(); ++i) {
      reads.push_back(Metric(cluster_->node(i), "granary_source_reads_total"));
    }
    return reads;
  }

  v1::PrewarmProgress Prewarm(size_t via, const std::string& name) {
    v1::PrewarmRequest request;
    request.set_name(name);
    request.set_group(kGroup);
    std::vector<v1::PrewarmProgress> progress;
    grpc::Status finished =
        testing::Prewarm(cluster_->node(via).SocketStub().get(), request, &progress);
    EXPECT_TRUE(finished.ok()) << finished.error_message();
    return progress.empty() ? v1::PrewarmProgress() : progress.back();
  }

  TempDir
      home_;  // granaryd's HOME: no shared credentials file, the keys come from the environment.
  VerifiedS3rver s3_;
  std::unique_ptr<GranaryCluster> cluster_;
  v1::DatasetInfo info_;
};

TEST_F(S3ClusterTest, ADatasetRegisteredOnOneNodeIsInEveryNodesCatalog) {
  EXPECT_EQ(info_.file_count(), kFiles);
  for (size_t i = 0; i < cluster_->size(); ++i) {
    absl::StatusOr<v1::DatasetInfo> dataset = cluster_->WaitForDataset(i, "train");
    ASSERT_TRUE(dataset.ok()) << dataset.status() << "\n" << cluster_->node(i).log();
    EXPECT_EQ(dataset->version(), info_.version());
    EXPECT_EQ(dataset->source(), info_.source());
  }
  EXPECT_EQ(s3_.front->object_gets(), 0);  // Registration lists the bucket; it reads no object.
}

TEST_F(S3ClusterTest, GroupPrewarmGetsEachChunkOnceByItsOwnerAndLocateFindsItWhole) {
  v1::PrewarmProgress prewarmed = Prewarm(1, "train");
  EXPECT_TRUE(prewarmed.finished());
  EXPECT_EQ(prewarmed.nodes(), 3u);
  EXPECT_EQ(prewarmed.chunks_total(), static_cast<uint64_t>(kChunks));
  EXPECT_EQ(prewarmed.chunks_done(), static_cast<uint64_t>(kChunks));
  EXPECT_EQ(prewarmed.failures_size(), 0);

  EXPECT_EQ(s3_.front->object_gets(), kChunks);
  EXPECT_EQ(s3_.front->signature_refusals(), 0);
  DatasetSnapshot snapshot = Snapshot("train");
  std::map<std::string, int> owned = ChunksPerOwner(snapshot.manifest, *Map(), kGroup);
  std::vector<double> reads = SourceReads();
  for (size_t i = 0; i < cluster_->size(); ++i) {
    EXPECT_GT(owned[cluster_->spec(i).id], 0) << cluster_->spec(i).id;
    EXPECT_EQ(reads[i], owned[cluster_->spec(i).id]) << cluster_->spec(i).id;
  }

  // Each chunk is on its owner and on no other node.
  std::vector<std::unique_ptr<DatasetClient>> clients;
  for (size_t i = 0; i < cluster_->size(); ++i) clients.push_back(ClientOf(i));
  for (int file = 0; file < kFiles; ++file) {
    for (uint32_t chunk = 0; chunk < kChunksPerFile; ++chunk) {
      const ChunkKey key{info_.version(), *snapshot.manifest.Find(FilePath(file)), chunk};
      const size_t owner = OwnerOf(key);
      for (size_t i = 0; i < cluster_->size(); ++i) {
        std::string data(kChunkSize, '\0');
        absl::Status held = clients[i]->ReadChunk(key, 0, data, ChunkSourcing::kCacheOnly);
        if (i == owner) {
          ASSERT_TRUE(held.ok()) << FilePath(file) << " chunk " << chunk << ": " << held;
          EXPECT_TRUE(data == FileBytes(file).substr(chunk * kChunkSize, kChunkSize))
              << FilePath(file) << " chunk " << chunk;
        } else {
          EXPECT_TRUE(absl::IsNotFound(held)) << FilePath(file) << " chunk " << chunk << " on "
                                              << cluster_->spec(i).id << ": " << held;
        }
      }
    }
  }
  EXPECT_EQ(SourceReads(), reads);

  grpc::ClientContext context;
  v1::LocateRequest request;
  request.set_name("train");
  request.set_fresh(true);
  v1::LocateResponse located;
  grpc::Status status = cluster_->node(2).SocketStub()->Locate(&context, request, &located);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(located.version(), info_.version());
  EXPECT_EQ(located.total_bytes(), uint64_t{kFiles} * kFileSize);
  ASSERT_EQ(located.groups_size(), 1);
  EXPECT_DOUBLE_EQ(located.groups(0).fraction(), 1.0);
  ASSERT_EQ(located.nodes_size(), 3);
  for (const v1::NodeLocality& node : located.nodes()) {
    EXPECT_EQ(node.cached_bytes(), uint64_t{kChunkSize} * owned[node.node_id()]) << node.node_id();
    EXPECT_DOUBLE_EQ(node.group_fraction(), 1.0) << node.node_id();
  }
}

TEST_F(S3ClusterTest, AColdReadThroughANodeThatIsNotTheOwnerIsGetByTheOwnerAlone) {
  Prewarm(0, "train");
  const std::string cold_bytes = PatternBytes(2 * kChunkSize, 77);
  Put("cold/sample.bin", cold_bytes);
  v1::DatasetInfo cold;
  grpc::Status added = AddDataset(cluster_->node(0).SocketStub().get(), "cold",
                                  S3SourceOf(kBucket, endpoint(), "cold"), kChunkSize, &cold);
  ASSERT_TRUE(added.ok()) << added.error_message();
  const ChunkKey key{cold.version(), *Snapshot("cold").manifest.Find("sample.bin"), 1};
  const size_t owner = OwnerOf(key);
  const size_t reader = (owner + 1) % cluster_->size();
  const std::vector<double> before = SourceReads();
  const int gets_before = s3_.front->object_gets();

  std::string data(kChunkSize, '\0');
  absl::Status read = ClientOf(reader)->ReadChunk(key, 0, data);
  ASSERT_TRUE(read.ok()) << read << "\n" << cluster_->node(reader).log();
  EXPECT_TRUE(data == cold_bytes.substr(kChunkSize)) << "wrong bytes through the non-owner";

  EXPECT_EQ(s3_.front->object_gets(), gets_before + 1);
  std::vector<double> after = SourceReads();
  for (size_t i = 0; i < cluster_->size(); ++i) {
    EXPECT_EQ(after[i], before[i] + (i == owner ? 1 : 0)) << cluster_->spec(i).id;
  }
  EXPECT_TRUE(ClientOf(owner)->ReadChunk(key, 0, data, ChunkSourcing::kCacheOnly).ok());
}

TEST_F(S3ClusterTest, ARefreshAfterAnObjectIsOverwrittenGivesEveryNodeTheNewVersion) {
  Prewarm(0, "train");
  const std::string overwritten = PatternBytes(kFileSize, 100);  // Same size, other bytes.
  Put("train/" + FilePath(0), overwritten);

  grpc::ClientContext context;
  v1::RefreshDatasetRequest refresh;
  refresh.set_name("train");
  v1::DatasetInfo refreshed;
  grpc::Status status =
      cluster_->node(1).SocketStub()->RefreshDataset(&context, refresh, &refreshed);
  ASSERT_TRUE(status.ok()) << status.error_message() << "\n" << cluster_->node(1).log();
  ASSERT_NE(refreshed.version(), info_.version());
  for (size_t i = 0; i < cluster_->size(); ++i) {
    absl::StatusOr<v1::DatasetInfo> dataset =
        cluster_->WaitForDataset(i, "train", refreshed.version());
    ASSERT_TRUE(dataset.ok()) << dataset.status();
    EXPECT_EQ(dataset->version(), refreshed.version()) << cluster_->spec(i).id;
  }

  // Read whole through every node, the overwritten file's chunks are each
  // GET once, by their owners.
  const std::vector<double> before = SourceReads();
  const int gets_before = s3_.front->object_gets();
  const uint64_t id = *Snapshot("train").manifest.Find(FilePath(0));
  std::map<size_t, int> owned;
  for (uint32_t chunk = 0; chunk < kChunksPerFile; ++chunk) {
    ++owned[OwnerOf({refreshed.version(), id, chunk})];
  }
  for (size_t i = 0; i < cluster_->size(); ++i) {
    std::string data(kFileSize, '\0');
    for (uint32_t chunk = 0; chunk < kChunksPerFile; ++chunk) {
      absl::Status read =
          ClientOf(i)->ReadChunk({refreshed.version(), id, chunk}, 0,
                                 std::span<char>(data.data() + chunk * kChunkSize, kChunkSize));
      ASSERT_TRUE(read.ok()) << cluster_->spec(i).id << " chunk " << chunk << ": " << read;
    }
    EXPECT_TRUE(data == overwritten) << "old bytes through " << cluster_->spec(i).id;
  }
  EXPECT_EQ(s3_.front->object_gets(), gets_before + static_cast<int>(kChunksPerFile));
  EXPECT_EQ(s3_.front->precondition_failures(), 0);
  std::vector<double> after = SourceReads();
  for (size_t i = 0; i < cluster_->size(); ++i) {
    EXPECT_EQ(after[i], before[i] + owned[i]) << cluster_->spec(i).id;
  }
}

}  // namespace
}  // namespace granary::testing
