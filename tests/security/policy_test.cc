// Attacks on granaryd's access policy by local users (findings 1, 2, 3, 7 and
// 9 of the trust-boundary review): registering and removing datasets without
// being an administrator, registering sources outside the source roots,
// reading files the source would refuse, finding cached bytes in the cache
// directory, forging catalog records, and sending oversized input. A real
// granaryd runs as root; the attackers are users made for the test.
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/member_clients.h"
#include "common/dataset/chunk_math.h"
#include "gtest/gtest.h"
#include "tests/security/security_support.h"
#include "tests/server/server_test_util.h"
#include "tests/support/granary_cluster.h"
#include "tests/support/granaryd_process.h"

namespace granary::testing {
namespace {

namespace fs = std::filesystem;

constexpr char kReaders[] = "granary-sec-readers";
constexpr char kAdmins[] = "granary-sec-admins";
constexpr char kSecret[] = "root-only secret 7f3a9c\n";

std::string FirstLine(const std::string& text) { return text.substr(0, text.find('\n')); }

// A granaryd run by root whose socket group is kReaders and admin group
// kAdmins, with one source root holding files of several owners and modes:
//   public.txt 0644 root   secret.txt 0600 root   alice.txt 0600 alice
//   private/inner.txt 0644 root, in a 0700 directory
// Users: alice and bob (readers), admin (readers and admins), outsider.
class PolicyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "creating users needs root";
    for (auto [user, name, groups] :
         {std::tuple{&alice_, "granary-sec-alice", std::vector<std::string>{kReaders}},
          std::tuple{&bob_, "granary-sec-bob", std::vector<std::string>{kReaders}},
          std::tuple{&admin_, "granary-sec-admin", std::vector<std::string>{kReaders, kAdmins}},
          std::tuple{&outsider_, "granary-sec-outsider", std::vector<std::string>{}}}) {
      absl::StatusOr<TestUser> made = EnsureTestUser(name, groups);
      ASSERT_TRUE(made.ok()) << made.status();
      *user = *made;
    }
    // Users must reach the sources and the socket, as on a real node.
    ASSERT_EQ(::chmod(roots_.path().c_str(), 0755), 0);
    source_ = roots_.path() + "/ds";
    WriteSourceFile(source_, "public.txt", "public\n");
    WriteSourceFile(source_, "secret.txt", kSecret);
    WriteSourceFile(source_, "alice.txt", "alice's own\n");
    WriteSourceFile(source_, "private/inner.txt", "inside a private directory\n");
    ::chmod((source_ + "/secret.txt").c_str(), 0600);
    ::chmod((source_ + "/alice.txt").c_str(), 0600);
    ASSERT_EQ(::chown((source_ + "/alice.txt").c_str(), alice_.uid, alice_.gid), 0);
    ::chmod((source_ + "/private").c_str(), 0700);
    WriteSourceFile(source_ + "/root-only", "key", kSecret);
    ::chmod((source_ + "/root-only").c_str(), 0700);

    absl::StatusOr<std::unique_ptr<GranarydProcess>> server =
        StartSharedGranaryd(roots_.path(), config_dir_.path(),
                            absl::StrCat("socket_group: ", kReaders, "\nadmin_group: ", kAdmins,
                                         "\nmax_datasets: 3\nmax_dataset_entries: 40\n"));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    ASSERT_EQ(Cli(nullptr, {"dataset", "add", "ds", source_}).exit_code, 0);
  }

  // `granary --server unix:SOCKET args...` as `user` (root when null).
  CommandResult Cli(const TestUser* user, std::vector<std::string> args) {
    return CliAs(*server_, user, std::move(args));
  }

  TempDir roots_;
  TempDir config_dir_;
  std::string source_;
  TestUser alice_, bob_, admin_, outsider_;
  std::unique_ptr<GranarydProcess> server_;
};

TEST_F(PolicyTest, OnlyAdministratorsRegisterRefreshAndRemove) {
  CommandResult added = Cli(&alice_, {"dataset", "add", "mine", source_ + "/root-only"});
  EXPECT_NE(added.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(added.stderr_text, "administrator")) << added.stderr_text;
  ReportAttack({"1", "a local user registers a root-only directory", "Unix socket",
                "PERMISSION_DENIED: an administrator's act", FirstLine(added.stderr_text)});

  CommandResult removed = Cli(&bob_, {"dataset", "rm", "ds"});
  EXPECT_NE(removed.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(removed.stderr_text, "administrator")) << removed.stderr_text;
  ReportAttack({"1", "a local user removes a dataset an administrator registered", "Unix socket",
                "PERMISSION_DENIED: an administrator's act", FirstLine(removed.stderr_text)});
  EXPECT_NE(Cli(&bob_, {"dataset", "refresh", "ds"}).exit_code, 0);
  EXPECT_EQ(Cli(nullptr, {"dataset", "show", "ds"}).exit_code, 0) << "the dataset is still there";

  // A member of the admin group administers as root does.
  EXPECT_EQ(Cli(&admin_, {"dataset", "add", "by-admin", source_ + "/private"}).exit_code, 0);
  EXPECT_EQ(Cli(&admin_, {"dataset", "rm", "by-admin"}).exit_code, 0);

  // Every change is audited with who asked and what came of it.
  const std::string log = server_->log();
  EXPECT_TRUE(absl::StrContains(log, absl::StrCat("audit: uid ", bob_.uid)) &&
              absl::StrContains(log, "RemoveDataset 'ds': PERMISSION_DENIED"))
      << log;
  EXPECT_TRUE(absl::StrContains(log, absl::StrCat("audit: uid ", admin_.uid)) &&
              absl::StrContains(log, "RemoveDataset 'by-admin': OK"))
      << log;
}

TEST_F(PolicyTest, UsersOutsideTheSocketGroupCannotConnect) {
  CommandResult status = Cli(&outsider_, {"status"});
  EXPECT_NE(status.exit_code, 0);
  ReportAttack({"1", "a user outside the socket's group asks for status", "Unix socket",
                "connection refused by the socket's mode (0660)", FirstLine(status.stderr_text)});
}

TEST_F(PolicyTest, SourcesOutsideTheSourceRootsAreRefused) {
  for (const std::string& source :
       {std::string("/etc"), std::string("/root"), roots_.path() + "/ds/../.."}) {
    CommandResult added = Cli(nullptr, {"dataset", "add", "escape", source});
    EXPECT_NE(added.exit_code, 0) << source;
    EXPECT_TRUE(absl::StrContains(added.stderr_text, "source roots")) << added.stderr_text;
    ReportAttack({"2", absl::StrCat("root registers ", source), "Unix socket",
                  "PERMISSION_DENIED: outside the source roots", FirstLine(added.stderr_text)});
  }
  fs::create_directory_symlink("/etc", roots_.path() + "/link-to-etc");
  CommandResult linked = Cli(nullptr, {"dataset", "add", "linked", roots_.path() + "/link-to-etc"});
  EXPECT_NE(linked.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(linked.stderr_text, "/etc")) << linked.stderr_text;
  ReportAttack({"2", "root registers a symlink inside the source roots that leads to /etc",
                "Unix socket", "PERMISSION_DENIED naming the real path",
                FirstLine(linked.stderr_text)});
}

TEST_F(PolicyTest, ReadsFollowTheSourcesOwnersAndModes) {
  // Both before and after the bytes are cached.
  for (bool cached : {false, true}) {
    SCOPED_TRACE(cached ? "cached" : "not cached");
    if (cached) {
      ASSERT_EQ(Cli(nullptr, {"prewarm", "ds"}).exit_code, 0);
    }
    CommandResult secret = Cli(&alice_, {"cat", "ds/secret.txt"});
    EXPECT_NE(secret.exit_code, 0);
    EXPECT_FALSE(absl::StrContains(secret.stdout_text, kSecret));
    EXPECT_TRUE(absl::StrContains(secret.stderr_text, "not readable")) << secret.stderr_text;
    ReportAttack({"2",
                  absl::StrCat("a user in the socket's group cats a root-only 0600 file",
                               cached ? " (cached)" : ""),
                  "Unix socket", "PERMISSION_DENIED, as in the source",
                  FirstLine(secret.stderr_text)});

    CommandResult inner = Cli(&alice_, {"cat", "ds/private/inner.txt"});
    EXPECT_NE(inner.exit_code, 0);
    EXPECT_TRUE(absl::StrContains(inner.stderr_text, "not searchable")) << inner.stderr_text;
    CommandResult others = Cli(&bob_, {"cat", "ds/alice.txt"});
    EXPECT_NE(others.exit_code, 0);
    ReportAttack({"2", "a user cats another user's 0600 file", "Unix socket",
                  "PERMISSION_DENIED, as in the source", FirstLine(others.stderr_text)});

    EXPECT_EQ(Cli(&alice_, {"cat", "ds/alice.txt"}).stdout_text, "alice's own\n");
    EXPECT_EQ(Cli(&bob_, {"cat", "ds/public.txt"}).stdout_text, "public\n");
    EXPECT_EQ(Cli(nullptr, {"cat", "ds/secret.txt"}).stdout_text, kSecret);
  }
}

TEST_F(PolicyTest, RefusedReadsDoNotHoldBackTheFill) {
  // A permitted read starts the dataset's fill, which waits while the
  // dataset is being read (fill_scheduler.h).
  ASSERT_EQ(Cli(nullptr, {"dataset", "add", "filled", source_, "--fill", "on-read"}).exit_code, 0);
  EXPECT_EQ(Cli(nullptr, {"cat", "filled/public.txt"}).stdout_text, "public\n");
  // A user refused every read keeps trying meanwhile: refused reads are not
  // reads of the dataset, so the fill still caches all five files.
  std::atomic<bool> stop = false;
  std::atomic<int> refused = 0;
  std::thread attacker([&] {
    while (!stop) {
      if (Cli(&alice_, {"cat", "filled/secret.txt"}).exit_code != 0) ++refused;
    }
  });
  bool filled = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  while (!filled && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    absl::StatusOr<double> chunks = server_->Metric("granary_store_chunks");
    filled = chunks.ok() && *chunks == 5;
  }
  stop = true;
  attacker.join();
  EXPECT_TRUE(filled) << "the fill waited on refused reads";
  EXPECT_GT(refused.load(), 0);
  ReportAttack({"new", "a user refused every read keeps reading to hold a dataset's fill back",
                "Unix socket", "refused reads do not count as reads; the fill ends",
                filled ? "the fill cached every file meanwhile" : "the fill waited"});
}

TEST_F(PolicyTest, CachedBytesAreReadableByGranarydAlone) {
  ASSERT_EQ(Cli(nullptr, {"prewarm", "ds"}).exit_code, 0);
  ASSERT_EQ(Cli(nullptr, {"cat", "ds/secret.txt"}).stdout_text, kSecret);
  int shared = 0, checked = 0;
  for (const fs::directory_entry& entry : fs::recursive_directory_iterator(server_->data_dir())) {
    struct stat st;
    ASSERT_EQ(::lstat(entry.path().c_str(), &st), 0);
    if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) continue;
    ++checked;
    if ((st.st_mode & 077) != 0) {
      ++shared;
      ADD_FAILURE() << entry.path() << " has mode " << std::oct << (st.st_mode & 07777);
    }
  }
  struct stat top;
  ASSERT_EQ(::stat(server_->data_dir().c_str(), &top), 0);
  EXPECT_EQ(top.st_mode & 077, 0u);
  absl::StatusOr<CommandResult> grep =
      RunAs(alice_, {"/usr/bin/grep", "-r", "-a", "-l", "root-only secret", server_->data_dir()});
  ASSERT_TRUE(grep.ok()) << grep.status();
  EXPECT_EQ(grep->stdout_text, "");
  ReportAttack({"3", "a user greps the cache directory for a cached root-only file", "filesystem",
                "nothing found: directories 0700, files 0600",
                absl::StrCat(FirstLine(grep->stderr_text), " (", checked,
                             " files and directories checked, ", shared, " open to others)")});
}

TEST_F(PolicyTest, OversizedAndMalformedInputIsRefusedBriefly) {
  const std::string long_name(10'000, 'n');
  CommandResult shown = Cli(&alice_, {"dataset", "show", long_name});
  EXPECT_NE(shown.exit_code, 0);
  EXPECT_LT(shown.stderr_text.size(), 2'000u) << shown.stderr_text.size();
  EXPECT_TRUE(absl::StrContains(shown.stderr_text, "10000 bytes")) << shown.stderr_text;
  ReportAttack({"9", "a 10 KB dataset name", "Unix socket",
                "INVALID_ARGUMENT echoing at most 128 bytes of it",
                absl::StrCat(shown.stderr_text.size(),
                             "-byte error: ", FirstLine(shown.stderr_text).substr(0, 90), "...")});

  v1::DatasetInfo info;
  grpc::Status nul = AddDataset(server_->SocketStub().get(), "nul",
                                std::string(source_) + std::string("\0/etc", 5), 0, &info);
  EXPECT_EQ(nul.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << nul.error_message();
  ReportAttack({"9", "root registers a source path with a NUL byte", "Unix socket",
                "INVALID_ARGUMENT", nul.error_message()});

  v1::PrewarmRequest request;
  request.set_name("ds");
  for (int i = 0; i < 20'000; ++i) request.add_paths("public.txt");
  std::vector<v1::PrewarmProgress> progress;
  grpc::Status prewarm = Prewarm(server_->SocketStub().get(), request, &progress);
  EXPECT_EQ(prewarm.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << prewarm.error_message();
  ReportAttack({"9", "a prewarm naming 20,000 paths", "Unix socket",
                "INVALID_ARGUMENT naming the maximum", prewarm.error_message()});
}

TEST_F(PolicyTest, DatasetsAndEntriesAreBounded) {
  WriteSourceFile(source_, "many/placeholder", "");
  for (int i = 0; i < 50; ++i) WriteSourceFile(source_ + "/many", absl::StrCat("f", i), "x");
  CommandResult wide = Cli(nullptr, {"dataset", "add", "wide", source_ + "/many"});
  EXPECT_NE(wide.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(wide.stderr_text, "max_dataset_entries")) << wide.stderr_text;
  ReportAttack({"9", "registering a source with more entries than max_dataset_entries (40)",
                "Unix socket", "RESOURCE_EXHAUSTED naming the limit", FirstLine(wide.stderr_text)});

  EXPECT_EQ(Cli(nullptr, {"dataset", "add", "two", source_ + "/private"}).exit_code, 0);
  EXPECT_EQ(Cli(nullptr, {"dataset", "add", "three", source_ + "/root-only"}).exit_code, 0);
  CommandResult fourth = Cli(nullptr, {"dataset", "add", "four", source_ + "/private"});
  EXPECT_NE(fourth.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(fourth.stderr_text, "max_datasets")) << fourth.stderr_text;
  ReportAttack({"9", "registering more datasets than max_datasets (3)", "Unix socket",
                "RESOURCE_EXHAUSTED naming the limit", FirstLine(fourth.stderr_text)});
}

TEST_F(PolicyTest, PeerExchangesAreForClusterMembersOnly) {
  v1::ExchangeCatalogRequest request;
  request.set_sender_id("intruder");
  v1::ExchangeCatalogResponse response;
  grpc::ClientContext context;
  grpc::Status exchanged = server_->SocketStub()->ExchangeCatalog(&context, request, &response);
  EXPECT_EQ(exchanged.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(response.records_size(), 0);
  ReportAttack({"7", "root on the node calls ExchangeCatalog over the Unix socket", "Unix socket",
                "PERMISSION_DENIED: for cluster members over TCP", exchanged.error_message()});

  v1::ExchangeLocalityRequest gossip;
  gossip.set_sender_id("intruder");
  gossip.mutable_own()->set_node_id("intruder");
  v1::ExchangeLocalityResponse reports;
  grpc::ClientContext gossip_context;
  grpc::Status gossiped =
      server_->SocketStub()->ExchangeLocality(&gossip_context, gossip, &reports);
  EXPECT_EQ(gossiped.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(reports.reports_size(), 0);
  ReportAttack({"new", "root on the node calls ExchangeLocality over the Unix socket",
                "Unix socket", "PERMISSION_DENIED: for cluster members over TCP",
                gossiped.error_message()});
}

// Finding 7: a holder of the cluster token forges catalog records for a
// dataset the cluster has, as if sent by a real member.
TEST(CatalogForgeryTest, ForgedRecordsAreNotAdopted) {
  TempDir roots;
  const std::string source = roots.path() + "/ds";
  WriteSourceFile(source, "a.txt", "the real source\n");
  GranaryCluster::Options options;
  options.nodes = {{"a"}, {"b"}};
  absl::StatusOr<std::unique_ptr<GranaryCluster>> cluster = GranaryCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  GranarydProcess& a = (*cluster)->node(0);
  v1::DatasetInfo info;
  ASSERT_TRUE(AddDataset(a.SocketStub().get(), "ds", source, 0, &info).ok());

  // Taken from a's own catalog, as a member would send it.
  v1::ExchangeCatalogRequest honest;
  honest.set_sender_id("b");
  {
    grpc::ClientContext context;
    v1::ExchangeCatalogResponse answer;
    ASSERT_TRUE(a.TcpStub()->ExchangeCatalog(&context, honest, &answer).ok());
    ASSERT_EQ(answer.records_size(), 1);
    *honest.add_records() = answer.records(0);
  }
  struct Forgery {
    std::string what;
    std::function<void(v1::CatalogDataset*)> forge;
  };
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  std::vector<Forgery> forgeries = {
      {"a record dated INT64_MAX pointing the dataset at /etc",
       [](v1::CatalogDataset* record) {
         record->set_updated_unix_ms(std::numeric_limits<int64_t>::max());
         record->set_source("/etc");
       }},
      {"a record dated now pointing the dataset at /etc",
       [&](v1::CatalogDataset* record) {
         record->set_updated_unix_ms(now_ms + 1000);
         record->set_source("/etc");
       }},
      {"a tombstone dated a day ahead",
       [&](v1::CatalogDataset* record) {
         record->set_updated_unix_ms(now_ms + 86'400'000);
         record->set_removed(true);
         record->clear_versions();
       }},
  };
  for (const Forgery& forgery : forgeries) {
    v1::ExchangeCatalogRequest request = honest;
    forgery.forge(request.mutable_records(0));
    grpc::ClientContext context;
    v1::ExchangeCatalogResponse answer;
    grpc::Status sent = a.TcpStub()->ExchangeCatalog(&context, request, &answer);
    v1::DatasetInfo after;
    grpc::ClientContext get_context;
    v1::GetDatasetRequest get;
    get.set_name("ds");
    grpc::Status still = a.SocketStub()->GetDataset(&get_context, get, &after);
    EXPECT_TRUE(still.ok()) << forgery.what << ": " << still.error_message();
    EXPECT_EQ(after.source(), source) << forgery.what;
    ReportAttack({"7", absl::StrCat("a token holder sends ", forgery.what, " as member b"), "TCP",
                  "record refused and logged; the dataset keeps its source",
                  absl::StrCat("exchange answered ", sent.ok() ? "OK" : sent.error_message(),
                               "; dataset source still ", after.source())});
  }
  EXPECT_TRUE(absl::StrContains(a.log(), "audit: refused a catalog record from node b")) << a.log();
  // A refresh scans the real source, not /etc.
  grpc::ClientContext refresh_context;
  v1::RefreshDatasetRequest refresh;
  refresh.set_name("ds");
  v1::DatasetInfo refreshed;
  ASSERT_TRUE(a.SocketStub()->RefreshDataset(&refresh_context, refresh, &refreshed).ok());
  EXPECT_EQ(refreshed.file_count(), 1u);
}

// A holder of the cluster token sends locality reports as member b: an
// honest one is adopted (a's Locate shows it), forged ones are refused and
// logged, and a's published answer keeps the honest figures.
TEST(LocalityForgeryTest, ForgedReportsAreNotAdopted) {
  TempDir roots;
  const std::string source = roots.path() + "/ds";
  WriteSourceFile(source, "a.txt", "the real source\n");
  GranaryCluster::Options options;
  options.nodes = {{"a"}, {"b"}};
  absl::StatusOr<std::unique_ptr<GranaryCluster>> cluster = GranaryCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  GranarydProcess& a = (*cluster)->node(0);
  v1::DatasetInfo info;
  ASSERT_TRUE(AddDataset(a.SocketStub().get(), "ds", source, 0, &info).ok());

  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  // Dated a minute ahead, so that b's own reports do not replace it during
  // the test.
  v1::ExchangeLocalityRequest honest;
  honest.set_sender_id("b");
  v1::LocalityReport* own = honest.mutable_own();
  own->set_node_id("b");
  own->set_group(std::string(kDefaultGroup));
  own->set_published_unix_ms(now_ms + 60'000);
  own->set_heartbeat_unix_ms(now_ms + 60'000);
  v1::DatasetHolding* holding = own->add_holdings();
  holding->set_name("ds");
  holding->set_version(info.version());
  holding->set_cached_bytes(7);
  auto send = [&](const v1::ExchangeLocalityRequest& request) {
    grpc::ClientContext context;
    v1::ExchangeLocalityResponse answer;
    return a.TcpStub()->ExchangeLocality(&context, request, &answer);
  };
  auto b_bytes_on_a = [&]() -> int64_t {
    grpc::ClientContext context;
    v1::LocateRequest request;
    request.set_name("ds");
    v1::LocateResponse located;
    EXPECT_TRUE(a.SocketStub()->Locate(&context, request, &located).ok());
    for (const v1::NodeLocality& node : located.nodes()) {
      if (node.node_id() == "b") return static_cast<int64_t>(node.cached_bytes());
    }
    return -1;
  };
  grpc::Status sent = send(honest);
  ASSERT_TRUE(sent.ok()) << sent.error_message();
  ASSERT_EQ(b_bytes_on_a(), 7);

  struct Forgery {
    std::string what;
    std::function<void(v1::ExchangeLocalityRequest*)> forge;
  };
  std::vector<Forgery> forgeries = {
      {"a report dated INT64_MAX claiming 1 TB",
       [](v1::ExchangeLocalityRequest* request) {
         request->mutable_own()->set_published_unix_ms(std::numeric_limits<int64_t>::max());
         request->mutable_own()->set_heartbeat_unix_ms(std::numeric_limits<int64_t>::max());
         request->mutable_own()->mutable_holdings(0)->set_cached_bytes(uint64_t{1} << 40);
       }},
      {"a report for node a (the callee itself)",
       [](v1::ExchangeLocalityRequest* request) {
         request->set_sender_id("a");
         request->mutable_own()->set_node_id("a");
       }},
      {"a report for a node that is not a member",
       [](v1::ExchangeLocalityRequest* request) {
         request->set_sender_id("ghost");
         request->mutable_own()->set_node_id("ghost");
       }},
      {"b's sender id carrying a's report",
       [](v1::ExchangeLocalityRequest* request) { request->mutable_own()->set_node_id("a"); }},
      {"a report naming a dataset '../etc'",
       [](v1::ExchangeLocalityRequest* request) {
         request->mutable_own()->set_published_unix_ms(request->own().published_unix_ms() + 1);
         request->mutable_own()->set_heartbeat_unix_ms(request->own().heartbeat_unix_ms() + 1);
         request->mutable_own()->mutable_holdings(0)->set_name("../etc");
       }},
  };
  for (const Forgery& forgery : forgeries) {
    v1::ExchangeLocalityRequest request = honest;
    forgery.forge(&request);
    grpc::Status forged = send(request);
    EXPECT_EQ(forged.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << forgery.what;
    EXPECT_EQ(b_bytes_on_a(), 7) << forgery.what;
    ReportAttack({"new", absl::StrCat("a token holder sends ", forgery.what), "TCP",
                  "INVALID_ARGUMENT, report refused; b's published figures unchanged",
                  forged.error_message()});
  }
  EXPECT_TRUE(absl::StrContains(a.log(), "audit: refused a locality report from node")) << a.log();
}

}  // namespace
}  // namespace granary::testing
