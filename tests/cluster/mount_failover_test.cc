// A reader in each cache group reads a dataset through a granary-fuse mount
// while a server of the cluster is killed with SIGKILL: no read fails, no byte
// is wrong, and the server, restarted, rejoins and serves its share again. A
// mount whose own server is down opens a dataset it had not loaded yet: the
// manifest comes from another member.
// Four real granaryd nodes (a1, a2 in rack-a; b1, b2 in rack-b) with a
// members file; mounts on a1 and b1.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include "client/chunk_router.h"
#include "grpcpp/client_context.h"
#include "tests/fuse/fuse_mount.h"
#include "tests/server/server_test_util.h"
#include "tests/support/granary_cluster.h"

namespace granary {
namespace {

using testing::AddDataset;
using testing::PatternBytes;

using testing::FuseMount;
using testing::GranaryCluster;
using testing::TempDir;

constexpr uint32_t kChunkSize = 1 << 20;
constexpr int kFilesPerPhase = 6;
constexpr size_t kFileSize = 7 * kChunkSize / 2;  // Four chunks, the last one half full.

std::string FileName(int phase, int file) {
  return "phase" + std::to_string(phase) + "/file" + std::to_string(file);
}

std::string FileBytes(int phase, int file) { return PatternBytes(kFileSize, phase * 100 + file); }

class MountFailoverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int phase = 0; phase < 3; ++phase) {
      std::filesystem::create_directories(source_.path() + "/phase" + std::to_string(phase));
      for (int file = 0; file < kFilesPerPhase; ++file) {
        std::ofstream(source_.path() + "/" + FileName(phase, file)) << FileBytes(phase, file);
      }
    }
    auto cluster = GranaryCluster::Start(
        {.nodes = {{"a1", "rack-a"}, {"a2", "rack-a"}, {"b1", "rack-b"}, {"b2", "rack-b"}},
         .etcd_endpoint = "",
         .extra_args = {}});
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = *std::move(cluster);
    v1::DatasetInfo info;
    ASSERT_TRUE(AddDataset(cluster_->node(0).SocketStub().get(), "images", source_.path(),
                           kChunkSize, &info)
                    .ok());
    for (size_t node : {0, 2}) {
      auto mount = FuseMount::Start(cluster_->node(node).socket_address(),
                                    {"--token-file", cluster_->cluster_token_file()}, "images");
      ASSERT_TRUE(mount.ok()) << mount.status();
      mounts_.push_back(*std::move(mount));
    }
  }

  // Two readers on each mount read every file of `phase` and compare it with
  // the source; `during` runs while they read.
  void ReadPhase(int phase, const std::function<void()>& during) {
    std::atomic<int> failed{0}, wrong{0}, verified{0};
    std::vector<std::thread> readers;
    for (auto& mount : mounts_) {
      for (int reader = 0; reader < 2; ++reader) {
        readers.emplace_back([&, path = mount->path(), reader] {
          for (int i = 0; i < kFilesPerPhase; ++i) {
            int file = (i + reader * kFilesPerPhase / 2) % kFilesPerPhase;
            std::ifstream in(path + "/images/" + FileName(phase, file), std::ios::binary);
            std::string bytes(std::istreambuf_iterator<char>(in), {});
            // A failed read (an I/O error) ends the file early.
            if (!in.is_open() || bytes.size() != kFileSize) {
              ++failed;
            } else if (bytes != FileBytes(phase, file)) {
              ++wrong;
            } else {
              ++verified;
            }
          }
        });
      }
    }
    during();
    for (std::thread& reader : readers) reader.join();
    EXPECT_EQ(failed.load(), 0) << "phase " << phase;
    EXPECT_EQ(wrong.load(), 0) << "phase " << phase;
    EXPECT_EQ(verified.load(), 4 * kFilesPerPhase) << "phase " << phase;
  }

  double Metric(size_t node, const std::string& name) {
    auto value = cluster_->node(node).Metric(name);
    return value.ok() ? *value : 0;
  }

  TempDir source_;
  std::unique_ptr<GranaryCluster> cluster_;
  std::vector<std::unique_ptr<FuseMount>> mounts_;
};

TEST_F(MountFailoverTest, ReadersInBothGroupsSurviveASigkilledServerThatThenRejoins) {
  ReadPhase(0, [] {});
  ReadPhase(1, [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    ASSERT_TRUE(cluster_->node(1).Kill().ok());
  });
  ASSERT_TRUE(cluster_->node(1).Restart().ok());
  // Chunk reads a2 answers: hits, or misses where its fill had not fetched
  // the chunk before it was killed.
  auto served = [&] {
    return Metric(1, "granary_cache_hits_total") + Metric(1, "granary_cache_misses_total");
  };
  double served_before = served();
  // Past the readers' suspect period for a2 (the mounts' routers keep the
  // default), so they ask it again.
  std::this_thread::sleep_for(ChunkRouter::Options().suspect_period + std::chrono::seconds(1));
  ReadPhase(2, [] {});
  EXPECT_GT(served(), served_before) << "a2 serves its share of rack-a again";
  for (auto& mount : mounts_) {
    EXPECT_TRUE(mount->Running()) << mount->log();
  }
}

TEST_F(MountFailoverTest, AFirstOpenOfADatasetWhileTheMountsServerIsDownGetsItsManifestFromAPeer) {
  // A second dataset, so that the mounts load each when it is first opened.
  TempDir more;
  std::ofstream(more.path() + "/notes.bin") << FileBytes(9, 9);
  v1::DatasetInfo info;
  ASSERT_TRUE(
      AddDataset(cluster_->node(2).SocketStub().get(), "more", more.path(), kChunkSize, &info)
          .ok());
  const std::string root = mounts_[0]->path();
  auto listed = [&] {  // Read off the root's listing: no lookup loads the dataset.
    for (const auto& entry : std::filesystem::directory_iterator(root)) {
      if (entry.path().filename() == "more") return true;
    }
    return false;
  };
  for (int i = 0; i < 100 && !listed(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(listed()) << "a1's mount shows the new dataset";

  // a1 stays down: past the wait a mount gives a restarting server.
  ASSERT_TRUE(cluster_->node(0).Kill().ok());
  std::ifstream in(root + "/more/notes.bin", std::ios::binary);
  ASSERT_TRUE(in.is_open()) << mounts_[0]->log();
  const std::string bytes(std::istreambuf_iterator<char>(in), {});
  EXPECT_TRUE(bytes == FileBytes(9, 9)) << bytes.size() << " bytes read";
  EXPECT_TRUE(mounts_[0]->Running());
}

}  // namespace
}  // namespace granary
