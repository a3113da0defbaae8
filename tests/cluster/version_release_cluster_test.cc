// Older versions in a cluster: two real granaryd nodes (one group, a members
// file) with a short grace period, and a granary-fuse mount on the second.
// Each node releases a version refreshed away by its own readers: the first,
// where nothing uses it, releases it; the second keeps it while a file of it
// is open on its mount, and later catalog exchanges neither bring it back to
// the first nor take it from the second; the open file reads correctly
// throughout, and once it is closed both catalogs hold the same versions.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "grpcpp/client_context.h"
#include "tests/fuse/fuse_mount.h"
#include "tests/server/server_test_util.h"
#include "tests/support/granary_cluster.h"

namespace granary {
namespace {

using testing::AddDataset;
using testing::FuseMount;
using testing::GranaryCluster;
using testing::PatternBytes;
using testing::TempDir;

constexpr uint32_t kChunkSize = 1 << 20;
constexpr size_t kFileSize = 6 * kChunkSize;
constexpr int kGraceSeconds = 3;

class VersionReleaseClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteSource("kept.bin", PatternBytes(kFileSize, 1));
    WriteSource("changed.bin", PatternBytes(kFileSize, 2));
    auto cluster = GranaryCluster::StartFormed(
        {.nodes = {{"n1", "rack-a"}, {"n2", "rack-a"}},
         .etcd_endpoint = "",
         .extra_args = {"--version-grace-seconds", std::to_string(kGraceSeconds)}});
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = *std::move(cluster);
    absl::StatusOr<v1::DatasetInfo> registered =
        cluster_->RegisterDataset(0, "images", source_.path(), kChunkSize);
    ASSERT_TRUE(registered.ok()) << registered.status();
    first_version_ = registered->version();
    auto mount = FuseMount::Start(cluster_->node(1).socket_address(),
                                  {"--token-file", cluster_->cluster_token_file(),
                                   "--no-passthrough", "--version-grace-seconds", "1"},
                                  "images");
    ASSERT_TRUE(mount.ok()) << mount.status();
    mount_ = *std::move(mount);
  }

  void WriteSource(const std::string& name, const std::string& bytes) {
    std::ofstream(source_.path() + "/" + name, std::ios::binary) << bytes;
  }

  v1::DatasetInfo DatasetOn(size_t node) {
    v1::GetDatasetRequest request;
    request.set_name("images");
    v1::DatasetInfo info;
    grpc::ClientContext context;
    grpc::Status status = cluster_->node(node).SocketStub()->GetDataset(&context, request, &info);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return info;
  }

  // Waits until node `node` lists `count` older versions; false if it
  // still does not after 30 s.
  bool EventuallyOlderVersionsOn(size_t node, int count) {
    for (int i = 0; i < 150; ++i) {
      if (DatasetOn(node).older_versions_size() == count) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    return false;
  }

  TempDir source_;
  std::unique_ptr<GranaryCluster> cluster_;
  std::unique_ptr<FuseMount> mount_;
  uint64_t first_version_ = 0;
};

TEST_F(VersionReleaseClusterTest, EachNodeReleasesByItsOwnReadersAndTheCatalogsStillConverge) {
  const std::string kept = PatternBytes(kFileSize, 1);
  int fd = open((mount_->path() + "/images/kept.bin").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  std::string head(kChunkSize, '\0');
  ASSERT_EQ(pread(fd, head.data(), head.size(), 0), static_cast<ssize_t>(head.size()));
  EXPECT_TRUE(head == kept.substr(0, kChunkSize));

  WriteSource("changed.bin", PatternBytes(kFileSize, 3));
  struct timeval times[2] = {{2000, 0}, {2000, 0}};
  ASSERT_EQ(utimes((source_.path() + "/changed.bin").c_str(), times), 0);
  v1::RefreshDatasetRequest refresh;
  refresh.set_name("images");
  v1::DatasetInfo refreshed;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(cluster_->node(0).SocketStub()->RefreshDataset(&context, refresh, &refreshed).ok());
  }
  ASSERT_EQ(refreshed.older_versions_size(), 1);
  EXPECT_EQ(DatasetOn(1).version(), refreshed.version()) << "pushed before the refresh answered";

  // n1 has no reader of the old version; n2's mount keeps it.
  ASSERT_TRUE(EventuallyOlderVersionsOn(0, 0)) << cluster_->node(0).log();
  EXPECT_EQ(DatasetOn(1).older_versions_size(), 1) << cluster_->node(1).log();

  // A change elsewhere makes n1 exchange every record with n2: records that
  // differ in released versions alone are equally new, so neither takes
  // the other's.
  TempDir other;
  std::ofstream(other.path() + "/x") << "x";
  v1::DatasetInfo other_info;
  ASSERT_TRUE(AddDataset(cluster_->node(0).SocketStub().get(), "other", other.path(), kChunkSize,
                         &other_info)
                  .ok());
  EXPECT_EQ(DatasetOn(0).older_versions_size(), 0);
  ASSERT_EQ(DatasetOn(1).older_versions_size(), 1);
  EXPECT_EQ(DatasetOn(1).older_versions(0), first_version_);

  // The open file reads its version whole: n2's share from n2's cache or the
  // source, n1's (released there) from the source, which still holds it.
  std::string whole(kFileSize, '\0');
  ASSERT_EQ(pread(fd, whole.data(), whole.size(), 0), static_cast<ssize_t>(whole.size()));
  EXPECT_TRUE(whole == kept);
  close(fd);

  EXPECT_TRUE(EventuallyOlderVersionsOn(1, 0)) << cluster_->node(1).log();
  EXPECT_EQ(DatasetOn(0).version(), DatasetOn(1).version());
}

}  // namespace
}  // namespace granary
