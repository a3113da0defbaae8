// A pod's receipt, kept when kubelet unpublishes its Granary volume: a real
// granary-csi publishes dataset ds of a real granary-fuse mount over a real
// granaryd into a target directory in kubelet's layout
// (<root>/pods/<uid>/volumes/...); a process in the pod's cgroup (named as
// Kubernetes' systemd driver names it) reads through the target; once
// NodeUnpublishVolume returns, granaryd keeps the receipt of pod:<uid>,
// naming ds at its version with the files and bytes read. Before that, the
// pod has no receipt.
#include <gtest/gtest.h>
#include <sys/mount.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "proto/jobs.grpc.pb.h"
#include "tests/csi/csi_plugin_process.h"
#include "tests/fuse/mounted_tree.h"
#include "tests/jobs/job_cgroups.h"

namespace granary::testing {
namespace {

constexpr char kPodUid[] = "5e6f7a8b-9c0d-4e1f-a2b3-c4d5e6f70819";
constexpr char kPodSlice[] =
    "kubepods.slice/kubepods-burstable.slice/"
    "kubepods-burstable-pod5e6f7a8b_9c0d_4e1f_a2b3_c4d5e6f70819.slice";

class CsiReceiptTest : public MountedTree {
 protected:
  void BuildTree() override {
    WriteFile(source_ + "/train/shard-0.bin", RandomBytes(2 * kChunk + 5, 1));
    WriteFile(source_ + "/labels.csv", "image,label\n0,cat\n1,dog\n");
  }

  void SetUp() override {
    MountedTree::SetUp();
    if (HasFatalFailure()) return;
    auto plugin = CsiPluginProcess::Start(mount_->path(), server_->socket_address());
    ASSERT_TRUE(plugin.ok()) << plugin.status();
    plugin_ = *std::move(plugin);
    const std::string volume =
        absl::StrCat(pods_.path(), "/pods/", kPodUid, "/volumes/kubernetes.io~csi/granary-ds");
    std::filesystem::create_directories(volume);
    target_ = volume + "/mount";
    jobs_ = v1::Jobs::NewStub(
        grpc::CreateChannel(server_->socket_address(), grpc::InsecureChannelCredentials()));
  }

  void TearDown() override {
    if (!target_.empty()) umount2(target_.c_str(), MNT_DETACH);
  }

  grpc::Status Receipt(v1::JobReceipt* receipt) {
    grpc::ClientContext context;
    v1::GetReceiptRequest request;
    request.set_job(absl::StrCat("pod:", kPodUid));
    return jobs_->GetReceipt(&context, request, receipt);
  }

  // Whether granaryd counted `bytes` read by the pod (granary-fuse reports
  // every second).
  bool Counted(uint64_t bytes) {
    for (int i = 0; i < 100; ++i) {
      grpc::ClientContext context;
      v1::ListJobsResponse listed;
      if (jobs_->ListJobs(&context, {}, &listed).ok()) {
        for (const v1::JobReads& job : listed.jobs()) {
          uint64_t read = 0;
          for (uint64_t origin_bytes : job.bytes()) read += origin_bytes;
          if (job.job() == absl::StrCat("pod:", kPodUid) && read >= bytes) return true;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }

  TempDir pods_;
  std::unique_ptr<CsiPluginProcess> plugin_;
  std::unique_ptr<v1::Jobs::Stub> jobs_;
  std::string target_;
  TestCgroups cgroups_;
};

TEST_F(CsiReceiptTest, UnpublishingAPodsVolumeKeepsThePodsReceipt) {
  ASSERT_TRUE(cgroups_.available()) << "no writable cgroup v2 hierarchy here";
  {
    grpc::ClientContext context;
    csi::v1::NodePublishVolumeResponse response;
    grpc::Status published = plugin_->Node()->NodePublishVolume(
        &context, ReadOnlyPublishRequest(target_, {{"dataset", "ds"}}), &response);
    ASSERT_TRUE(published.ok()) << published.error_message() << plugin_->log();
  }
  const uint64_t bytes = 2 * kChunk + 5 + std::filesystem::file_size(source_ + "/labels.csv");
  auto [code, output] = RunInCgroup(
      cgroups_.Make(kPodSlice), 0,
      absl::StrCat("cat ", target_, "/train/shard-0.bin ", target_, "/labels.csv > /dev/null"));
  ASSERT_EQ(code, 0) << output;
  ASSERT_TRUE(Counted(bytes));
  v1::JobReceipt before;
  EXPECT_EQ(Receipt(&before).error_code(), grpc::StatusCode::NOT_FOUND)
      << "a running pod has no receipt yet";

  grpc::ClientContext context;
  csi::v1::NodeUnpublishVolumeRequest request;
  request.set_volume_id("granary-ds");
  request.set_target_path(target_);
  csi::v1::NodeUnpublishVolumeResponse response;
  grpc::Status unpublished = plugin_->Node()->NodeUnpublishVolume(&context, request, &response);
  ASSERT_TRUE(unpublished.ok()) << unpublished.error_message();

  v1::JobReceipt receipt;
  grpc::Status got = Receipt(&receipt);
  ASSERT_TRUE(got.ok()) << got.error_message() << "\n" << plugin_->log();
  EXPECT_EQ(receipt.job(), absl::StrCat("pod:", kPodUid));
  absl::StatusOr<v1::DatasetInfo> dataset = GetDataset(*server_, "ds");
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  ASSERT_EQ(receipt.reads_size(), 1) << receipt.DebugString();
  EXPECT_EQ(receipt.reads(0).dataset(), "ds");
  EXPECT_EQ(receipt.reads(0).version(), dataset->version());
  EXPECT_EQ(receipt.reads(0).files_opened(), 2u);
  uint64_t read = 0;
  for (uint64_t origin_bytes : receipt.reads(0).bytes()) read += origin_bytes;
  EXPECT_EQ(read, bytes);
  EXPECT_NE(plugin_->log().find(absl::StrCat("job pod:", kPodUid, " ended")), std::string::npos)
      << plugin_->log();
}

}  // namespace
}  // namespace granary::testing
