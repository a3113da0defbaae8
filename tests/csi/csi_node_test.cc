// granary-csi as a kubelet sees it: a real granary-csi process spoken to in
// CSI v1 over its Unix socket, publishing datasets of a real granary-fuse
// mount over a real granaryd into real target directories, with reads
// through the target checked against the source.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/dataset/chunk_key.h"
#include "csi/mount_table.h"
#include "grpcpp/client_context.h"
#include "tests/csi/csi_plugin_process.h"
#include "tests/fuse/mounted_tree.h"

namespace granary::testing {
namespace {

using AccessMode = csi::v1::VolumeCapability::AccessMode;

constexpr char kNodeId[] = "gpu-017";
constexpr char kGroup[] = "rack-b";

// The mounts at `path` in this process's mount table.
int MountsAt(const std::string& path) {
  absl::StatusOr<std::vector<csi_driver::MountEntry>> table = csi_driver::ReadMountTable();
  EXPECT_TRUE(table.ok()) << table.status();
  int count = 0;
  for (const csi_driver::MountEntry& entry :
       table.value_or(std::vector<csi_driver::MountEntry>{})) {
    count += entry.mount_point == path;
  }
  return count;
}

class CsiNodeTest : public MountedTree {
 protected:
  void BuildTree() override {
    WriteFile(source_ + "/train/shard-0.bin", RandomBytes(3 * kChunk + 17, 1));
    WriteFile(source_ + "/train/shard-1.bin", RandomBytes(kChunk, 2));
    WriteFile(source_ + "/labels.csv", "image,label\n0,cat\n1,dog\n");
    WriteFile(source_ + "/empty", "");
  }

  void SetUp() override {
    MountedTree::SetUp();
    if (HasFatalFailure()) return;
    auto plugin = CsiPluginProcess::Start(mount_->path(), server_->socket_address(),
                                          {"--node-id", kNodeId, "--group", kGroup});
    ASSERT_TRUE(plugin.ok()) << plugin.status();
    plugin_ = *std::move(plugin);
    // Kubelet's layout: the pod's volume directory exists, its mount
    // directory is the plugin's to create.
    target_ = pods_.path() + "/pod-1/volumes/kubernetes.io~csi/granary-ds/mount";
    std::filesystem::create_directories(pods_.path() +
                                        "/pod-1/volumes/kubernetes.io~csi/granary-ds");
  }

  void TearDown() override {
    // Bind mounts of the dataset keep nothing of the test alive, but they
    // must not outlive it either.
    for (int i = 0; i < 4 && MountsAt(target_) > 0; ++i) umount2(target_.c_str(), MNT_DETACH);
  }

  grpc::Status Publish(const csi::v1::NodePublishVolumeRequest& request) {
    grpc::ClientContext context;
    csi::v1::NodePublishVolumeResponse response;
    return plugin_->Node()->NodePublishVolume(&context, request, &response);
  }

  grpc::Status Unpublish(const std::string& target) {
    grpc::ClientContext context;
    csi::v1::NodeUnpublishVolumeRequest request;
    request.set_volume_id("granary-ds");
    request.set_target_path(target);
    csi::v1::NodeUnpublishVolumeResponse response;
    return plugin_->Node()->NodeUnpublishVolume(&context, request, &response);
  }

  grpc::Status Stats(const std::string& path, csi::v1::NodeGetVolumeStatsResponse* response) {
    grpc::ClientContext context;
    csi::v1::NodeGetVolumeStatsRequest request;
    request.set_volume_id("granary-ds");
    request.set_volume_path(path);
    return plugin_->Node()->NodeGetVolumeStats(&context, request, response);
  }

  grpc::Status Probe(csi::v1::ProbeResponse* response) {
    grpc::ClientContext context;
    return plugin_->Identity()->Probe(&context, {}, response);
  }

  // Every file of the source read through `root` equals the source's.
  void ExpectSameTree(const std::string& root) {
    int files = 0;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(source_)) {
      std::string relative = std::filesystem::relative(entry.path(), source_).string();
      ASSERT_TRUE(std::filesystem::exists(root + "/" + relative)) << relative;
      if (!entry.is_regular_file()) continue;
      EXPECT_EQ(ReadWhole(root + "/" + relative), ReadWhole(entry.path().string())) << relative;
      ++files;
    }
    EXPECT_EQ(files, 4);
  }

  TempDir pods_;
  std::unique_ptr<CsiPluginProcess> plugin_;
  std::string target_;
};

TEST_F(CsiNodeTest, IdentityNamesTheDriverWithoutAControllerAndIsReady) {
  grpc::ClientContext info_context;
  csi::v1::GetPluginInfoResponse info;
  ASSERT_TRUE(plugin_->Identity()->GetPluginInfo(&info_context, {}, &info).ok());
  EXPECT_EQ(info.name(), "csi.granary.io");
  EXPECT_FALSE(info.vendor_version().empty());

  grpc::ClientContext capabilities_context;
  csi::v1::GetPluginCapabilitiesResponse capabilities;
  ASSERT_TRUE(
      plugin_->Identity()->GetPluginCapabilities(&capabilities_context, {}, &capabilities).ok());
  ASSERT_EQ(capabilities.capabilities_size(), 1);
  EXPECT_EQ(capabilities.capabilities(0).service().type(),
            csi::v1::PluginCapability::Service::VOLUME_ACCESSIBILITY_CONSTRAINTS);

  csi::v1::ProbeResponse probe;
  ASSERT_TRUE(Probe(&probe).ok());
  EXPECT_TRUE(probe.has_ready() && probe.ready().value());
}

TEST_F(CsiNodeTest, NodeReportsItsIdItsCacheGroupAsTopologyAndVolumeStats) {
  grpc::ClientContext info_context;
  csi::v1::NodeGetInfoResponse info;
  ASSERT_TRUE(plugin_->Node()->NodeGetInfo(&info_context, {}, &info).ok());
  EXPECT_EQ(info.node_id(), kNodeId);
  EXPECT_EQ(info.accessible_topology().segments().at("topology.granary.io/group"), kGroup);

  grpc::ClientContext capabilities_context;
  csi::v1::NodeGetCapabilitiesResponse capabilities;
  ASSERT_TRUE(plugin_->Node()->NodeGetCapabilities(&capabilities_context, {}, &capabilities).ok());
  ASSERT_EQ(capabilities.capabilities_size(), 1) << "no STAGE_UNSTAGE_VOLUME: publish only";
  EXPECT_EQ(capabilities.capabilities(0).rpc().type(),
            csi::v1::NodeServiceCapability::RPC::GET_VOLUME_STATS);
}

TEST_F(CsiNodeTest, PublishedDatasetReadsAsTheSourceReadOnlyUntilUnpublished) {
  grpc::Status published = Publish(ReadOnlyPublishRequest(target_, {{"dataset", "ds"}}));
  ASSERT_TRUE(published.ok()) << published.error_message() << "\n" << plugin_->log();
  ExpectSameTree(target_);

  struct statvfs filesystem;
  ASSERT_EQ(statvfs(target_.c_str(), &filesystem), 0);
  EXPECT_TRUE(filesystem.f_flag & ST_RDONLY);
  EXPECT_TRUE(filesystem.f_flag & ST_NOSUID);
  EXPECT_TRUE(filesystem.f_flag & ST_NODEV);
  EXPECT_LT(open((target_ + "/new").c_str(), O_WRONLY | O_CREAT, 0644), 0);
  EXPECT_EQ(errno, EROFS);
  absl::StatusOr<std::vector<csi_driver::MountEntry>> table = csi_driver::ReadMountTable();
  ASSERT_TRUE(table.ok());
  const csi_driver::MountEntry* entry = csi_driver::TopmostMountAt(*table, target_);
  ASSERT_NE(entry, nullptr);
  EXPECT_EQ(entry->root, "/ds") << "the one dataset, not the whole mount";
  EXPECT_EQ(entry->fs_type, "fuse.granary");

  csi::v1::NodeGetVolumeStatsResponse stats;
  grpc::Status stated = Stats(target_, &stats);
  ASSERT_TRUE(stated.ok()) << stated.error_message();
  ASSERT_EQ(stats.usage_size(), 2);
  EXPECT_EQ(stats.usage(0).unit(), csi::v1::VolumeUsage::BYTES);
  EXPECT_EQ(stats.usage(0).total(), 4 * kChunk + 17 + 24);
  EXPECT_EQ(stats.usage(0).used(), stats.usage(0).total());
  EXPECT_EQ(stats.usage(0).available(), 0);
  EXPECT_EQ(stats.usage(1).unit(), csi::v1::VolumeUsage::INODES);
  EXPECT_EQ(stats.usage(1).total(), 4 + 2) << "4 files, the root and train/";

  grpc::Status unpublished = Unpublish(target_);
  ASSERT_TRUE(unpublished.ok()) << unpublished.error_message();
  EXPECT_EQ(MountsAt(target_), 0);
  EXPECT_FALSE(std::filesystem::exists(target_)) << "the plugin removes what it created";
  EXPECT_TRUE(Unpublish(target_).ok()) << "unpublish is idempotent";

  csi::v1::NodeGetVolumeStatsResponse gone;
  grpc::Status stated_gone = Stats(target_, &gone);
  EXPECT_EQ(stated_gone.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(stated_gone.error_message().find(target_), std::string::npos)
      << stated_gone.error_message();
}

TEST_F(CsiNodeTest, PublishingADatasetPrewarmsItOnTheNode) {
  absl::StatusOr<v1::DatasetInfo> cold = GetDataset(*server_, "ds");
  ASSERT_TRUE(cold.ok()) << cold.status();
  ASSERT_EQ(cold->cached_bytes(), 0u) << "the test's granaryd fills nothing by itself";
  ASSERT_TRUE(Publish(ReadOnlyPublishRequest(target_, {{"dataset", "ds"}})).ok());
  uint64_t cached = 0;
  for (int i = 0; i < 200 && cached < cold->total_bytes(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    absl::StatusOr<v1::DatasetInfo> info = GetDataset(*server_, "ds");
    ASSERT_TRUE(info.ok()) << info.status();
    cached = info->cached_bytes();
  }
  EXPECT_EQ(cached, cold->total_bytes()) << "before the pod read a byte\n" << plugin_->log();
  EXPECT_TRUE(Unpublish(target_).ok());
}

TEST_F(CsiNodeTest, PublishingTwiceIsIdempotentAndAnotherDatasetOnTheTargetIsRefused) {
  TempDir other_source;
  WriteFile(other_source.path() + "/other.txt", "another dataset");
  ASSERT_TRUE(AddDataset(*server_, "other", other_source.path()).ok());
  for (int i = 0; i < 100 && !std::filesystem::exists(mount_->path() + "/other"); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }

  ASSERT_TRUE(Publish(ReadOnlyPublishRequest(target_, {{"dataset", "ds"}})).ok()) << plugin_->log();
  grpc::Status again = Publish(ReadOnlyPublishRequest(target_, {{"dataset", "ds"}}));
  EXPECT_TRUE(again.ok()) << again.error_message();
  EXPECT_EQ(MountsAt(target_), 1) << "the same publish mounts once";
  EXPECT_FALSE(std::filesystem::exists(target_ + "/other.txt"))
      << "a pod sees the dataset it asked for, not the others of the node";

  grpc::Status other = Publish(ReadOnlyPublishRequest(target_, {{"dataset", "other"}}));
  EXPECT_EQ(other.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_NE(other.error_message().find("/ds"), std::string::npos) << other.error_message();
  EXPECT_EQ(MountsAt(target_), 1);
  ExpectSameTree(target_);

  std::string second_target = pods_.path() + "/pod-2-mount";
  ASSERT_TRUE(Publish(ReadOnlyPublishRequest(second_target, {{"dataset", "other"}})).ok());
  EXPECT_EQ(ReadWhole(second_target + "/other.txt"), "another dataset");
  EXPECT_TRUE(Unpublish(second_target).ok());
  EXPECT_TRUE(Unpublish(target_).ok());
  EXPECT_EQ(MountsAt(target_) + MountsAt(second_target), 0);
}

TEST_F(CsiNodeTest, BadRequestsAreRefusedNamingWhatIsWrong) {
  struct BadRequest {
    std::string what;
    csi::v1::NodePublishVolumeRequest request;
    grpc::StatusCode code;
    std::string named;
  };
  std::vector<BadRequest> bad;
  bad.push_back({"no dataset attribute", ReadOnlyPublishRequest(target_, {}),
                 grpc::StatusCode::INVALID_ARGUMENT, "\"dataset\" is required"});
  bad.push_back({"misspelt attribute", ReadOnlyPublishRequest(target_, {{"datset", "ds"}}),
                 grpc::StatusCode::INVALID_ARGUMENT, "unknown key 'datset'"});
  bad.push_back({"a path, not a name", ReadOnlyPublishRequest(target_, {{"dataset", "../ds"}}),
                 grpc::StatusCode::INVALID_ARGUMENT, "'../ds' is not a dataset name"});
  bad.push_back({"the parent directory", ReadOnlyPublishRequest(target_, {{"dataset", ".."}}),
                 grpc::StatusCode::INVALID_ARGUMENT, "'..' is not a dataset name"});
  bad.push_back({"malformed version",
                 ReadOnlyPublishRequest(target_, {{"dataset", "ds"}, {"version", "latest"}}),
                 grpc::StatusCode::INVALID_ARGUMENT, "version 'latest'"});
  bad.push_back({"relative target", ReadOnlyPublishRequest("pods/mount", {{"dataset", "ds"}}),
                 grpc::StatusCode::INVALID_ARGUMENT, "target_path 'pods/mount'"});
  bad.push_back({"target with ..",
                 ReadOnlyPublishRequest(pods_.path() + "/../x", {{"dataset", "ds"}}),
                 grpc::StatusCode::INVALID_ARGUMENT, "without '.' or '..'"});
  csi::v1::NodePublishVolumeRequest no_id = ReadOnlyPublishRequest(target_, {{"dataset", "ds"}});
  no_id.clear_volume_id();
  bad.push_back(
      {"no volume id", no_id, grpc::StatusCode::INVALID_ARGUMENT, "volume_id is required"});
  csi::v1::NodePublishVolumeRequest no_capability =
      ReadOnlyPublishRequest(target_, {{"dataset", "ds"}});
  no_capability.clear_volume_capability();
  bad.push_back({"no capability", no_capability, grpc::StatusCode::INVALID_ARGUMENT,
                 "volume_capability is required"});
  csi::v1::NodePublishVolumeRequest block = ReadOnlyPublishRequest(target_, {{"dataset", "ds"}});
  block.mutable_volume_capability()->mutable_block();
  bad.push_back({"block volume", block, grpc::StatusCode::FAILED_PRECONDITION,
                 "block volumes are not supported"});
  csi::v1::NodePublishVolumeRequest writer = ReadOnlyPublishRequest(target_, {{"dataset", "ds"}});
  writer.mutable_volume_capability()->mutable_access_mode()->set_mode(
      AccessMode::SINGLE_NODE_WRITER);
  bad.push_back({"writer access mode", writer, grpc::StatusCode::FAILED_PRECONDITION,
                 "SINGLE_NODE_WRITER writes"});
  csi::v1::NodePublishVolumeRequest flags = ReadOnlyPublishRequest(target_, {{"dataset", "ds"}});
  flags.mutable_volume_capability()->mutable_mount()->add_mount_flags("exec");
  bad.push_back({"mount flag", flags, grpc::StatusCode::INVALID_ARGUMENT, "mount flag 'exec'"});

  for (const BadRequest& each : bad) {
    grpc::Status refused = Publish(each.request);
    EXPECT_EQ(refused.error_code(), each.code) << each.what << ": " << refused.error_message();
    EXPECT_NE(refused.error_message().find(each.named), std::string::npos)
        << each.what << ": " << refused.error_message();
  }
  EXPECT_EQ(MountsAt(target_), 0);
  EXPECT_FALSE(std::filesystem::exists(target_)) << "nothing was created for a bad request";

  csi::v1::NodeUnpublishVolumeRequest relative;
  relative.set_volume_id("granary-ds");
  relative.set_target_path("mount");
  grpc::ClientContext context;
  csi::v1::NodeUnpublishVolumeResponse response;
  grpc::Status refused = plugin_->Node()->NodeUnpublishVolume(&context, relative, &response);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << refused.error_message();
}

TEST_F(CsiNodeTest, MissingDatasetOrVersionIsNotFound) {
  grpc::Status missing = Publish(ReadOnlyPublishRequest(target_, {{"dataset", "imagenet"}}));
  EXPECT_EQ(missing.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(missing.error_message().find("dataset 'imagenet' is not in the granary-fuse mount"),
            std::string::npos)
      << missing.error_message();
  EXPECT_EQ(MountsAt(target_), 0);

  absl::StatusOr<v1::DatasetInfo> info = GetDataset(*server_, "ds");
  ASSERT_TRUE(info.ok()) << info.status();
  grpc::Status stale = Publish(ReadOnlyPublishRequest(
      target_, {{"dataset", "ds"}, {"version", FormatVersion(info->version() + 1)}}));
  EXPECT_EQ(stale.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(stale.error_message().find("is at version " + FormatVersion(info->version())),
            std::string::npos)
      << stale.error_message();
  EXPECT_EQ(MountsAt(target_), 0);

  grpc::Status pinned = Publish(ReadOnlyPublishRequest(
      target_, {{"dataset", "ds"}, {"version", FormatVersion(info->version())}}));
  ASSERT_TRUE(pinned.ok()) << pinned.error_message();
  ExpectSameTree(target_);
  EXPECT_TRUE(Unpublish(target_).ok());
}

TEST_F(CsiNodeTest, PublishedVolumesOutliveARestartedPlugin) {
  ASSERT_TRUE(Publish(ReadOnlyPublishRequest(target_, {{"dataset", "ds"}})).ok());
  ASSERT_TRUE(plugin_->Restart().ok()) << plugin_->log();
  ExpectSameTree(target_);
  EXPECT_TRUE(Publish(ReadOnlyPublishRequest(target_, {{"dataset", "ds"}})).ok())
      << "the mount table, not the plugin's memory, says what is published";
  csi::v1::NodeGetVolumeStatsResponse stats;
  EXPECT_TRUE(Stats(target_, &stats).ok());
  EXPECT_TRUE(Unpublish(target_).ok());
  EXPECT_EQ(MountsAt(target_), 0);
}

// A published volume is a bind mount of granary-fuse's mount and shares its
// FUSE connection: the granary-fuse started after one died takes both over.
TEST_F(CsiNodeTest, APublishedVolumeReadsOnWhenGranaryFuseIsRestarted) {
  ASSERT_TRUE(Publish(ReadOnlyPublishRequest(target_, {{"dataset", "ds"}})).ok());
  ExpectSameTree(target_);
  mount_->Kill();
  ASSERT_TRUE(mount_->Restart().ok());
  ExpectSameTree(target_);
  ASSERT_TRUE(Unpublish(target_).ok());
}

// A mount whose FUSE connection is gone (its connection keeper too, as when
// granary-fuse's container restarts; here the connection is aborted through
// fusectl) answers ENOTCONN: reported, and nothing is published on it.
TEST_F(CsiNodeTest, AMountWhoseConnectionIsGoneIsReportedAndNothingIsPublished) {
  struct stat root;
  ASSERT_EQ(::stat(mount_->path().c_str(), &root), 0);
  const std::string connections = "/sys/fs/fuse/connections";
  struct statfs fusectl;
  if (::statfs(connections.c_str(), &fusectl) != 0 || fusectl.f_type != 0x65735543) {
    ASSERT_EQ(::mount("fusectl", connections.c_str(), "fusectl", 0, nullptr), 0)
        << std::strerror(errno);
  }
  mount_->Kill();
  std::ofstream(absl::StrCat(connections, "/", minor(root.st_dev), "/abort")) << "1\n";
  csi::v1::ProbeResponse probe;
  grpc::Status probed = Probe(&probe);
  EXPECT_EQ(probed.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(probed.error_message().find("does not answer"), std::string::npos)
      << probed.error_message();
  grpc::Status published = Publish(ReadOnlyPublishRequest(target_, {{"dataset", "ds"}}));
  EXPECT_EQ(published.error_code(), grpc::StatusCode::UNAVAILABLE) << published.error_message();
  EXPECT_NE(published.error_message().find(mount_->path()), std::string::npos)
      << published.error_message();
  EXPECT_EQ(MountsAt(target_), 0);
}

TEST(CsiPluginTest, WithoutAGranaryFuseMountItIsNotReady) {
  TempDir empty;
  auto server = GranarydProcess::Start();
  ASSERT_TRUE(server.ok()) << server.status();
  auto plugin = CsiPluginProcess::Start(empty.path(), (*server)->socket_address());
  ASSERT_TRUE(plugin.ok()) << plugin.status();
  grpc::ClientContext context;
  csi::v1::ProbeResponse probe;
  grpc::Status probed = (*plugin)->Identity()->Probe(&context, {}, &probe);
  EXPECT_EQ(probed.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(probed.error_message().find(empty.path() + " is not a granary-fuse mount"),
            std::string::npos)
      << probed.error_message();
}

TEST(CsiPluginTest, BadFlagsAreRefusedNamingThem) {
  struct BadFlags {
    std::vector<std::string> args;
    std::string named;
  };
  std::vector<BadFlags> bad = {
      {{"--endpoint", "tcp://127.0.0.1:10000"}, "--endpoint 'tcp://127.0.0.1:10000'"},
      {{"--endpoint", "unix://relative.sock"}, "--endpoint 'unix://relative.sock'"},
      {{"--mount", "mnt/granary"}, "--mount 'mnt/granary'"},
      {{"--mount", "/mnt/granary/"}, "--mount '/mnt/granary/' must not end in '/'"},
      {{"--bogus"}, "--bogus"},
  };
  for (const BadFlags& each : bad) {
    absl::StatusOr<ExitedProcess> ran = RunProgram(CsiPluginPath(), each.args);
    ASSERT_TRUE(ran.ok()) << ran.status();
    EXPECT_NE(ran->exit_code, 0) << each.named;
    EXPECT_NE(ran->stderr_text.find(each.named), std::string::npos) << ran->stderr_text;
  }
}

TEST(MountTableTest, ParsesTheKernelsEscapesAndOptions) {
  absl::StatusOr<std::vector<csi_driver::MountEntry>> table = csi_driver::ParseMountInfo(
      "36 25 0:52 / /mnt/granary rw,nosuid,nodev - fuse.granary granary ro,user_id=0\n"
      "40 36 0:52 /image\\040net /var/lib/kubelet/pods/a\\011b/mount ro,nosuid shared:7 "
      "master:1 - fuse.granary granary ro\n");
  ASSERT_TRUE(table.ok()) << table.status();
  ASSERT_EQ(table->size(), 2u);
  EXPECT_EQ((*table)[0].mount_point, "/mnt/granary");
  EXPECT_FALSE((*table)[0].read_only) << "the per-mount options, not the superblock's";
  EXPECT_EQ((*table)[1].root, "/image net");
  EXPECT_EQ((*table)[1].mount_point, "/var/lib/kubelet/pods/a\tb/mount");
  EXPECT_TRUE((*table)[1].read_only);
  EXPECT_EQ((*table)[1].fs_type, "fuse.granary");
  EXPECT_EQ((*table)[1].device, "0:52");

  absl::StatusOr<std::vector<csi_driver::MountEntry>> bad =
      csi_driver::ParseMountInfo("36 25 0:52 / /mnt\n");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("line 1"), std::string::npos);
}

}  // namespace
}  // namespace granary::testing
