// A network partition between cache groups. Two network namespaces made for
// the test, joined by a veth pair: rack-a's granaryd (a1, a2) and its mount
// in one, rack-b's (b1, b2) and its mount in the other. rack-a is prewarmed;
// rack-b copies what its readers miss from rack-a's owners. Then the veth is
// taken down: existing connections across it hang and new ones fail. Readers
// on both sides see no error and no wrong byte: rack-a serves from its own
// group (no source read), rack-b from its own group and the source. Once the
// link is back, rack-b copies from rack-a again.
//
// Needs root and `ip netns`; skips otherwise.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/base/file_util.h"
#include "common/base/status.h"
#include "tests/faults/cluster_faults.h"
#include "tests/fuse/fuse_mount.h"
#include "tests/server/server_test_util.h"
#include "tests/support/child_process.h"
#include "tests/support/granary_cluster.h"

namespace granary::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// The mounts' deadline for one chunk read.
constexpr int kMountDeadlineMs = 2000;
// How long the groups stay apart.
constexpr std::chrono::seconds kCut{15};

// Runs `ip ARGS...`; its output in the error.
absl::Status Ip(const std::vector<std::string>& args) {
  TempDir temp;
  const std::string log = temp.path() + "/ip.log";
  GRANARY_ASSIGN_OR_RETURN(pid_t pid, SpawnChild("/usr/sbin/ip", args, log));
  std::optional<int> status = WaitForExit(pid, seconds(10));
  if (!status.has_value()) KillChild(pid);
  if (status.has_value() && WIFEXITED(*status) && WEXITSTATUS(*status) == 0) {
    return absl::OkStatus();
  }
  return absl::UnavailableError(absl::StrCat("ip ", absl::StrJoin(args, " "), ": ",
                                             ReadFileToString(log, "ip output").value_or("")));
}

// Two network namespaces joined by a veth pair, removed (with the pair) by
// the destructor whatever happened. Side s has address host(s) on its
// loopback, for its servers to listen on, and a route to the other side's
// over the veth.
class NamespacePair {
 public:
  // UNAVAILABLE when namespaces cannot be made here (not root, no iproute2).
  static absl::StatusOr<std::unique_ptr<NamespacePair>> Create() {
    if (::geteuid() != 0) return absl::UnavailableError("network namespaces need root");
    if (::access("/usr/sbin/ip", X_OK) != 0 || ::access("/usr/bin/nsenter", X_OK) != 0) {
      return absl::UnavailableError("no /usr/sbin/ip or /usr/bin/nsenter");
    }
    RemoveLeftovers();
    std::unique_ptr<NamespacePair> pair(new NamespacePair);
    const std::string tag = absl::StrCat(::getpid());
    for (int side = 0; side < 2; ++side) {
      pair->names_[side] = absl::StrCat("granary-", side == 0 ? "a" : "b", tag);
      pair->links_[side] = absl::StrCat("gr", side == 0 ? "a" : "b", tag);
      GRANARY_RETURN_IF_ERROR(Ip({"netns", "add", pair->names_[side]}));
      pair->made_[side] = true;
    }
    GRANARY_RETURN_IF_ERROR(
        Ip({"link", "add", pair->links_[0], "netns", pair->names_[0], "type", "veth", "peer",
            "name", pair->links_[1], "netns", pair->names_[1]}));
    for (int side = 0; side < 2; ++side) {
      const std::string& ns = pair->names_[side];
      GRANARY_RETURN_IF_ERROR(Ip({"-n", ns, "link", "set", "lo", "up"}));
      GRANARY_RETURN_IF_ERROR(Ip({"-n", ns, "addr", "add", pair->host(side) + "/32", "dev", "lo"}));
      GRANARY_RETURN_IF_ERROR(
          Ip({"-n", ns, "addr", "add", absl::StrCat("10.77.0.", side + 1, "/30"), "dev",
              pair->links_[side]}));
    }
    GRANARY_RETURN_IF_ERROR(pair->Heal());
    return pair;
  }

  ~NamespacePair() {
    // Deleting a namespace deletes its end of the pair, and so the pair.
    for (int side = 0; side < 2; ++side) {
      if (made_[side]) Ip({"netns", "del", names_[side]}).IgnoreError();
    }
  }

  const std::string& name(int side) const { return names_[side]; }
  std::string host(int side) const { return absl::StrCat("10.77.", side + 1, ".1"); }
  // Runs a command in side `side`'s namespace (its network only: mounts are
  // shared with the test).
  std::vector<std::string> Prefix(int side) const {
    return {"/usr/bin/nsenter", "--net=/run/netns/" + names_[side], "--"};
  }

  // Takes the link down: side 0 loses its route to side 1 (connecting fails
  // at once), side 1's packets are dropped (connections hang until their
  // deadline).
  absl::Status Cut() { return Ip({"-n", names_[0], "link", "set", links_[0], "down"}); }
  // Brings the link up and routes each side's host to the other.
  absl::Status Heal() {
    for (int side = 0; side < 2; ++side) {
      GRANARY_RETURN_IF_ERROR(Ip({"-n", names_[side], "link", "set", links_[side], "up"}));
    }
    for (int side = 0; side < 2; ++side) {
      GRANARY_RETURN_IF_ERROR(Ip({"-n", names_[side], "route", "replace", host(1 - side) + "/32",
                                  "via", absl::StrCat("10.77.0.", 2 - side)}));
    }
    return absl::OkStatus();
  }

 private:
  NamespacePair() = default;

  // Namespaces of earlier runs whose test process died before its
  // destructors ran (named after its pid, which no longer exists).
  static void RemoveLeftovers() {
    std::error_code ignored;
    for (const auto& entry : std::filesystem::directory_iterator("/run/netns", ignored)) {
      const std::string name = entry.path().filename().string();
      int pid = 0;
      if ((name.starts_with("granary-a") || name.starts_with("granary-b")) &&
          absl::SimpleAtoi(name.substr(9), &pid) && pid > 0 && ::kill(pid, 0) != 0 &&
          errno == ESRCH) {
        Ip({"netns", "del", name}).IgnoreError();
      }
    }
  }

  std::string names_[2];
  std::string links_[2];
  bool made_[2] = {false, false};
};

// Moves the calling thread into a network namespace for its life: sockets it
// opens (a server's metrics on its loopback) and processes it starts (a
// mount) are in that namespace.
class ThreadInNamespace {
 public:
  explicit ThreadInNamespace(const std::string& name)
      : home_(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC)) {
    int target = ::open(("/run/netns/" + name).c_str(), O_RDONLY | O_CLOEXEC);
    EXPECT_TRUE(home_ >= 0 && target >= 0 && ::setns(target, CLONE_NEWNET) == 0)
        << "entering " << name << ": " << std::strerror(errno);
    if (target >= 0) ::close(target);
  }
  ~ThreadInNamespace() {
    EXPECT_EQ(::setns(home_, CLONE_NEWNET), 0) << std::strerror(errno);
    ::close(home_);
  }
  ThreadInNamespace(const ThreadInNamespace&) = delete;
  ThreadInNamespace& operator=(const ThreadInNamespace&) = delete;

 private:
  const int home_;
};

class PartitionTest : public ::testing::Test {
 protected:
  void TearDown() override { ::unsetenv("GRANARY_TOKEN_FILE"); }

  void SetUp() override {
    auto pair = NamespacePair::Create();
    if (!pair.ok()) GTEST_SKIP() << "no network namespaces here: " << pair.status();
    pair_ = *std::move(pair);
    std::vector<ClusterNode> nodes;
    for (int side = 0; side < 2; ++side) {
      const std::string group = side == 0 ? "rack-a" : "rack-b";
      for (const char* n : {"1", "2"}) {
        nodes.push_back({absl::StrCat(side == 0 ? "a" : "b", n), group, pair_->host(side),
                         pair_->Prefix(side)});
      }
    }
    auto cluster =
        GranaryCluster::StartFormed({.nodes = nodes, .etcd_endpoint = "", .extra_args = {}});
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = *std::move(cluster);
    // granary cat and granary-fuse call the peers over TCP, with its token.
    ASSERT_EQ(::setenv("GRANARY_TOKEN_FILE", cluster_->cluster_token_file().c_str(), 1), 0);
  }

  // Node i's metric (read from inside its namespace); -1 if absent.
  double Metric(size_t i, const std::string& name) {
    ThreadInNamespace in(pair_->name(i < 2 ? 0 : 1));
    return cluster_->node(i).Metric(name).value_or(-1);
  }
  // The sum of a metric over a side's two nodes.
  double SideMetric(int side, const std::string& name) {
    return Metric(2 * side, name) + Metric(2 * side + 1, name);
  }

  std::unique_ptr<NamespacePair> pair_;  // Declared first: removed last.
  TempDir source_;
  std::unique_ptr<GranaryCluster> cluster_;
  std::unique_ptr<FuseMount> mounts_[2];  // Declared last: unmounted first.
};

TEST_F(PartitionTest, EachSideServesFromItsOwnGroupAndTheSourceAndCopiesAgainOnceHealed) {
  // One-chunk files: read by rack-b before the cut (copied from rack-a),
  // during it, and after it (enough misses for each rack-b node to try a
  // copy at least once even where it prefers the source: FetchSpeeds).
  const std::vector<SourceFile> files = WriteSourceTree(source_.path(), "f", 160, kClusterChunk);
  const std::vector<SourceFile> before(files.begin(), files.begin() + 16);
  const std::vector<SourceFile> during(files.begin(), files.begin() + 64);
  const std::vector<SourceFile> after(files.begin() + 64, files.end());
  v1::DatasetInfo info;
  ASSERT_TRUE(
      AddDataset(cluster_->node(0).SocketStub().get(), "ds", source_.path(), kClusterChunk, &info)
          .ok());
  v1::PrewarmRequest prewarm;
  prewarm.set_name("ds");
  prewarm.set_group("rack-a");
  std::vector<v1::PrewarmProgress> progress;
  ASSERT_TRUE(Prewarm(cluster_->node(0).SocketStub().get(), prewarm, &progress).ok());
  ASSERT_TRUE(!progress.empty() && progress.back().failures_size() == 0);
  // The catalog reaches rack-b over the link.
  absl::StatusOr<DatasetSnapshot> snapshot = absl::NotFoundError("not yet");
  for (int attempt = 0; attempt < 100 && !snapshot.ok(); ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(milliseconds(100));
    snapshot = (*DatasetClient::Connect(cluster_->node(2).socket_address()))->GetManifest("ds");
  }
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  std::string mounted[2];
  for (int side = 0; side < 2; ++side) {
    ThreadInNamespace in(pair_->name(side));
    auto mount = FuseMount::Start(cluster_->node(2 * side).socket_address(),
                                  {"--rpc-timeout-ms", absl::StrCat(kMountDeadlineMs)}, "ds");
    ASSERT_TRUE(mount.ok()) << mount.status();
    mounts_[side] = *std::move(mount);
    mounted[side] = mounts_[side]->path() + "/ds";
  }

  // Before: rack-b copies its misses from rack-a.
  ReadTally tally;
  for (const SourceFile& file : before) ReadAndVerify(mounted[1] + "/" + file.path, file, &tally);
  EXPECT_EQ(SideMetric(1, "granary_peer_copies_total"), before.size());
  EXPECT_EQ(SideMetric(1, "granary_source_reads_total"), 0);

  // The cut, with two readers on each side.
  const double a_source_reads = SideMetric(0, "granary_source_reads_total");
  ASSERT_TRUE(pair_->Cut().ok());
  const double first_b_read =
      TimedRead(mounted[1] + "/" + during.back().path, during.back(), &tally);
  const double first_a_read =
      TimedRead(mounted[0] + "/" + during.front().path, during.front(), &tally);
  ReadTally sides[2];
  {
    ReaderPool a_readers(mounted[0], during, 2, /*seed=*/21);
    ReaderPool b_readers(mounted[1], during, 2, /*seed=*/22);
    std::this_thread::sleep_for(kCut);
    a_readers.Stop();
    b_readers.Stop();
    sides[0] = a_readers.Tally();
    sides[1] = b_readers.Tally();
  }
  EXPECT_EQ(SideMetric(0, "granary_source_reads_total"), a_source_reads)
      << "rack-a served from its own group";
  EXPECT_GT(SideMetric(1, "granary_source_reads_total"), 0) << "rack-b read the source";

  // Healed: rack-b copies from rack-a again, once its connections are back.
  ASSERT_TRUE(pair_->Heal().ok());
  Clock::time_point healed = Clock::now();
  double copies_again = -1;
  int copied_after = 0;
  for (const SourceFile& file : after) {
    const double copies = SideMetric(1, "granary_peer_copies_total");
    ReadAndVerify(mounted[1] + "/" + file.path, file, &tally);
    if (SideMetric(1, "granary_peer_copies_total") > copies) {
      if (copies_again < 0) copies_again = SecondsSince(healed);
      ++copied_after;
    } else if (copies_again < 0) {
      // Not yet: the mount and rack-b's channels wait out their backoff.
      std::this_thread::sleep_for(milliseconds(100));
    }
  }
  EXPECT_GE(copies_again, 0) << "rack-b never copied from rack-a after the link came back";
  // Within the channels' reconnection backoff (seconds, even on loaded
  // cores), not never or after the readers' whole run.
  EXPECT_LT(copies_again, 10.0);

  for (int side = 0; side < 2; ++side) {
    EXPECT_EQ(sides[side].errors, 0u)
        << "side " << side << ": " << sides[side].first_errors.front();
    EXPECT_EQ(sides[side].bytes_wrong, 0u) << "side " << side;
    EXPECT_GT(sides[side].reads_verified, 0u) << "side " << side;
    EXPECT_TRUE(mounts_[side]->Running()) << mounts_[side]->log();
  }
  EXPECT_EQ(tally.errors, 0u) << tally.first_errors.front();
  EXPECT_EQ(tally.bytes_wrong, 0u);
  ReadTally all = tally;
  for (const ReadTally& side : sides) {
    all.reads_verified += side.reads_verified;
    all.errors += side.errors;
    all.bytes_wrong += side.bytes_wrong;
  }
  ReportFaultRow(
      {absl::StrFormat("Network partition between two cache groups for %d s (network namespaces "
                       "and a veth pair; 2 readers through a mount on each side)",
                       static_cast<int>(kCut.count())),
       1, all,
       absl::StrFormat(
           "rack-a served %d reads from its own group (no source read); rack-b %d reads from its "
           "own group and the source (first read across the cut %.2f s, rack-a's %.2f s); "
           "healed: rack-b copied from rack-a again %.2f s later (%d of %d reads)",
           sides[0].reads_verified, sides[1].reads_verified, first_b_read, first_a_read,
           copies_again, copied_after, after.size())});
}

}  // namespace
}  // namespace granary::testing
