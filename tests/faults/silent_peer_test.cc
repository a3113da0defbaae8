// A peer that accepts connections and never answers: a granaryd of the
// readers' cache group, stopped with SIGSTOP after it cached its share. The
// kernel still accepts connections to it and those already open stay up, so
// its callers learn nothing until a deadline fires.
//
// Nodes a1, a2, a3 in rack-a and b1 in rack-b; a2 goes silent; a mount on a1
// and `granary cat` through a1 read. Each round stops a2, times the first
// read of a chunk it owns through the mount and through `granary cat`, lets
// four readers go on through the mount, and wakes a2 again. Readers see no
// error and no wrong byte: the deadline fires and the read goes to the
// chunk's next owner, which misses and first asks a2 (to fetch it as its
// owner, then for a copy); a reader whose deadline is shorter than those
// calls' reads the source. The other
// servers keep serving: b1, copying a chunk from the silent owner, gives up
// at its peer-copy deadline and reads the source; Status answers; a group
// prewarm moves the silent node's share to the next owners (it waited on a2
// forever before GroupPrewarm gave up on members that send no progress).
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/chunk_router.h"
#include "grpcpp/client_context.h"
#include "tests/faults/cluster_faults.h"
#include "tests/fuse/fuse_mount.h"
#include "tests/server/server_test_util.h"
#include "tests/support/granary_cluster.h"

namespace granary::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// The mount's deadline for one chunk read: what a silent owner costs.
constexpr int kMountDeadlineMs = 2000;
// granaryd's deadline for copying a chunk from a peer (cache_server/server.cc).
constexpr double kPeerCopyDeadlineSeconds = 5;
// How long a failed member stays suspect in a router: waited out between
// rounds, so each round's first read asks a2 first. The routers are the
// mount's and granary cat's, in other processes, which expose no suspicion
// to poll; they run with the default.
const milliseconds kSuspectPeriod = ChunkRouter::Options().suspect_period;

class SilentPeerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto cluster = GranaryCluster::StartFormed(
        {.nodes = {{"a1", "rack-a"}, {"a2", "rack-a"}, {"a3", "rack-a"}, {"b1", "rack-b"}},
         .etcd_endpoint = "",
         .extra_args = {}});
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = *std::move(cluster);
    // granary cat and granary-fuse call the peers over TCP, with its token.
    ASSERT_EQ(::setenv("GRANARY_TOKEN_FILE", cluster_->cluster_token_file().c_str(), 1), 0);
  }

  void TearDown() override {
    if (cluster_ != nullptr) Wake();
    ::unsetenv("GRANARY_TOKEN_FILE");
  }

  void Silence() {
    ASSERT_EQ(::kill(cluster_->node(1).pid(), SIGSTOP), 0);
    silent_ = true;
  }
  void Wake() {
    if (silent_) ::kill(cluster_->node(1).pid(), SIGCONT);
    silent_ = false;
  }

  TempDir source_;
  std::unique_ptr<GranaryCluster> cluster_;
  bool silent_ = false;
};

TEST_F(SilentPeerTest, ReadsFailOverWhenAnOwnerAcceptsConnectionsButNeverAnswers) {
  // A third of the other faults' rounds: each costs several deadlines.
  const int rounds = std::max(EnvInt("GRANARY_FAULT_ROUNDS", 10) / 3, 1);
  // One-chunk files: two probes a round of a2's, the rest for the readers.
  const std::vector<SourceFile> files =
      WriteSourceTree(source_.path(), "f", 60 + 6 * rounds, kClusterChunk);
  GranarydProcess& a1 = cluster_->node(0);
  GranarydProcess& b1 = cluster_->node(3);
  v1::DatasetInfo info;
  ASSERT_TRUE(AddDataset(a1.SocketStub().get(), "ds", source_.path(), kClusterChunk, &info).ok());
  v1::PrewarmRequest prewarm;
  prewarm.set_name("ds");
  prewarm.set_group("rack-a");
  // Enough workers that moving a2's share costs one peer-copy deadline.
  prewarm.set_parallelism(32);
  std::vector<v1::PrewarmProgress> progress;
  ASSERT_TRUE(Prewarm(a1.SocketStub().get(), prewarm, &progress).ok());
  DatasetClient::Options patient;
  patient.read_timeout = seconds(60);
  absl::StatusOr<std::unique_ptr<DatasetClient>> b1_client =
      DatasetClient::Connect(b1.socket_address(), patient);
  ASSERT_TRUE(b1_client.ok());
  absl::StatusOr<DatasetSnapshot> snapshot = (*b1_client)->GetManifest("ds");
  // The registering node waits for its peers only so long: on a loaded
  // machine a peer gets the record later.
  for (int i = 0; i < 100 && absl::IsNotFound(snapshot.status()); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    snapshot = (*b1_client)->GetManifest("ds");
  }
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  std::map<std::string, std::vector<SourceFile>> owned =
      FilesByOwner(*snapshot, files, **ClusterMap::Build(cluster_->Members()), "rack-a");
  std::vector<SourceFile>& silent_owned = owned["a2"];
  ASSERT_GE(silent_owned.size(), static_cast<size_t>(2 * rounds + 1));
  // Probes: files of a2's that nothing reads before their round.
  std::vector<SourceFile> probes(silent_owned.end() - 2 * rounds, silent_owned.end());
  silent_owned.resize(silent_owned.size() - 2 * rounds);
  std::vector<SourceFile> read_by_pool;
  for (const auto& [owner, owner_files] : owned) {
    read_by_pool.insert(read_by_pool.end(), owner_files.begin(), owner_files.end());
  }

  auto mount = FuseMount::Start(a1.socket_address(),
                                {"--rpc-timeout-ms", absl::StrCat(kMountDeadlineMs)}, "ds");
  ASSERT_TRUE(mount.ok()) << mount.status();
  const std::string mounted = (*mount)->path() + "/ds";
  // Warm: every connection the mount makes (a2's included) is open when a2
  // goes silent.
  ReadTally probe_tally;
  for (const SourceFile& file : read_by_pool)
    ReadAndVerify(mounted + "/" + file.path, file, &probe_tally);
  ReaderPool readers(mounted, read_by_pool, 4, /*seed=*/11);

  // Before the group prewarm of round 0, the next owners miss a2's chunks;
  // after it, they hold them.
  double first_mount = 0, first_cat = 0, later_mount = 0, later_cat = 0;
  double peer_copy_seconds = 0, status_seconds = 0, group_prewarm_seconds = 0;
  for (int round = 0; round < rounds; ++round) {
    SCOPED_TRACE(absl::StrCat("round ", round));
    Silence();
    if (HasFatalFailure()) return;
    const double mount_seconds =
        TimedRead(mounted + "/" + probes[2 * round].path, probes[2 * round], &probe_tally);
    absl::StatusOr<double> cat_seconds =
        TimedCat(a1.socket_address(), "ds", probes[2 * round + 1], &probe_tally);
    EXPECT_TRUE(cat_seconds.ok()) << cat_seconds.status();
    double& mount_worst = round == 0 ? first_mount : later_mount;
    double& cat_worst = round == 0 ? first_cat : later_cat;
    mount_worst = std::max(mount_worst, mount_seconds);
    cat_worst = std::max(cat_worst, cat_seconds.value_or(0));

    if (round == 0) {
      // b1 holds nothing: a miss asks rack-a's owner (a2) for a copy first.
      const double copy_errors = b1.Metric("granary_peer_copy_errors_total").value_or(-1);
      const SourceFile& file = silent_owned.front();
      std::string chunk(file.size, '\0');
      Clock::time_point start = Clock::now();
      absl::Status copied = (*b1_client)->ReadChunk(KeyOf(*snapshot, file.path), 0, chunk);
      peer_copy_seconds = SecondsSince(start);
      EXPECT_TRUE(copied.ok()) << copied;
      TallyRead(chunk, ExpectedBytes(file.seed, 0, file.size), &probe_tally);
      EXPECT_LE(peer_copy_seconds, kPeerCopyDeadlineSeconds + 5);
      EXPECT_EQ(b1.Metric("granary_peer_copy_errors_total").value_or(-1), copy_errors + 1);

      // Status answers, naming a2 unreachable.
      grpc::ClientContext status_call;
      status_call.set_deadline(std::chrono::system_clock::now() + seconds(20));
      v1::StatusResponse status;
      start = Clock::now();
      grpc::Status answered = a1.SocketStub()->Status(&status_call, {}, &status);
      status_seconds = SecondsSince(start);
      EXPECT_TRUE(answered.ok()) << answered.error_message();
      for (const v1::NodeStatus& node : status.nodes()) {
        EXPECT_EQ(node.state(), node.node_id() == "a2" ? "unreachable" : "up") << node.node_id();
      }

      // A group prewarm finishes, a2's share moved to the next owners.
      grpc::ClientContext prewarm_call;
      prewarm_call.set_deadline(std::chrono::system_clock::now() + seconds(60));
      start = Clock::now();
      auto stream = a1.SocketStub()->Prewarm(&prewarm_call, prewarm);
      v1::PrewarmProgress last;
      while (stream->Read(&last)) {
      }
      grpc::Status finished = stream->Finish();
      group_prewarm_seconds = SecondsSince(start);
      EXPECT_TRUE(finished.ok()) << finished.error_message();
      EXPECT_TRUE(last.finished());
      EXPECT_EQ(last.nodes(), 2u);
      EXPECT_EQ(last.chunks_done(), last.chunks_total());
    } else {
      std::this_thread::sleep_for(kSuspectPeriod);
    }
    Wake();
    // a2 answers again before the next round stops it.
    ASSERT_TRUE(cluster_->WaitForMembers(1, {"a1", "a2", "a3", "b1"}).ok());
    std::this_thread::sleep_for(kSuspectPeriod);
  }
  readers.Stop();

  ReadTally tally = readers.Tally();
  EXPECT_EQ(tally.errors, 0u) << tally.first_errors.front();
  EXPECT_EQ(tally.bytes_wrong, 0u);
  EXPECT_EQ(probe_tally.errors, 0u);
  EXPECT_EQ(probe_tally.bytes_wrong, 0u);
  EXPECT_GT(tally.reads_verified, static_cast<uint64_t>(rounds));
  EXPECT_TRUE((*mount)->Running()) << (*mount)->log();
  std::vector<double> latencies = readers.Latencies();
  const double slowest_reader = Quantile(latencies, 1.0);
  tally.reads_verified += probe_tally.reads_verified;
  ReportFaultRow(
      {"A peer that accepts connections and never answers (SIGSTOPped granaryd owning a third "
       "of rack-a's chunks; a mount with 4 readers and granary cat)",
       rounds, tally,
       absl::StrFormat(
           "first read of a chunk it owns: through the mount %.2f s (its %.0f s deadline at a2, "
           "again at the next owner, itself waiting on a2; then the source), by granary cat "
           "%.2f s (the next owner answered once its calls to a2 timed out); once the next "
           "owners held a2's share, at most %.2f s / %.2f s; slowest of %d reader reads %.2f s; "
           "b1's copy from a2 gave up after %.2f s and read the source; Status %.2f s; group "
           "prewarm moved a2's share in %.2f s",
           first_mount, kMountDeadlineMs / 1e3, first_cat, later_mount, later_cat, latencies.size(),
           slowest_reader, peer_copy_seconds, status_seconds, group_prewarm_seconds)});
}

}  // namespace
}  // namespace granary::testing
