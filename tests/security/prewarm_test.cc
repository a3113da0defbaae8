// What a user's prewarms may cost the others (findings 4 and 5 of the second
// trust-boundary review): a prewarm asking for 256 workers, many prewarms at
// once, a prewarm of files the user may not read, and prewarms that would
// fill the cache. A real granaryd runs as root; the attackers are users made
// for the test, sending raw requests on connections of their own.
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "tests/security/security_support.h"
#include "tests/server/server_test_util.h"
#include "tests/support/granaryd_process.h"

namespace granary::testing {
namespace {

namespace fs = std::filesystem;

constexpr char kReaders[] = "granary-pw-readers";
constexpr char kAdmins[] = "granary-pw-admins";

std::string FirstLine(const std::string& text) { return text.substr(0, text.find('\n')); }

// The threads of process `pid` now.
int ThreadsOf(pid_t pid) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    if (line.starts_with("Threads:")) return std::stoi(line.substr(8));
  }
  return -1;
}

// A sparse file of `size` bytes: chunks to fetch that cost the source no disk.
void WriteSparseFile(const std::string& dir, const std::string& name, uint64_t size) {
  fs::create_directories(dir);
  std::ofstream(dir + "/" + name).close();
  fs::resize_file(dir + "/" + name, size);
}

// A stub on a connection of its own to `address`: made on a user's thread,
// it carries that user's credentials.
std::unique_ptr<v1::Granary::Stub> OwnStub(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return v1::Granary::NewStub(
      grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
}

// A granaryd run by root whose socket group is kReaders and admin group
// kAdmins, started by each test with its own prewarm settings. Users:
// mallory and bob (readers), admin (readers and admins).
class PrewarmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "creating users needs root";
    for (auto [user, name, groups] :
         {std::tuple{&mallory_, "granary-pw-mallory", std::vector<std::string>{kReaders}},
          std::tuple{&bob_, "granary-pw-bob", std::vector<std::string>{kReaders}},
          std::tuple{&admin_, "granary-pw-admin", std::vector<std::string>{kReaders, kAdmins}}}) {
      absl::StatusOr<TestUser> made = EnsureTestUser(name, groups);
      ASSERT_TRUE(made.ok()) << made.status();
      *user = *made;
    }
    absl::StatusOr<gid_t> readers = EnsureGroup(kReaders);
    absl::StatusOr<gid_t> admins = EnsureGroup(kAdmins);
    ASSERT_TRUE(readers.ok() && admins.ok());
    readers_gid_ = *readers;
    admins_gid_ = *admins;
    ASSERT_EQ(::chmod(roots_.path().c_str(), 0755), 0);
  }

  // Starts granaryd with `settings` (YAML lines) besides the groups.
  void StartServer(const std::string& settings) {
    absl::StatusOr<std::unique_ptr<GranarydProcess>> server = StartSharedGranaryd(
        roots_.path(), config_dir_.path(),
        absl::StrCat("socket_group: ", kReaders, "\nadmin_group: ", kAdmins, "\n", settings));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }

  void AddAsRoot(const std::string& name, const std::string& source) {
    v1::DatasetInfo info;
    grpc::Status added = AddDataset(server_->SocketStub().get(), name, source, 0, &info);
    ASSERT_TRUE(added.ok()) << added.error_message();
  }

  std::vector<gid_t> GroupsOf(const TestUser& user) const {
    return &user == &admin_ ? std::vector<gid_t>{readers_gid_, admins_gid_}
                            : std::vector<gid_t>{readers_gid_};
  }

  // A whole prewarm as `user` (root when null).
  grpc::Status PrewarmAs(const TestUser* user, const v1::PrewarmRequest& request,
                         std::vector<v1::PrewarmProgress>* progress) {
    grpc::Status status;
    auto run = [&] {
      status = Prewarm(OwnStub(server_->socket_address()).get(), request, progress);
    };
    if (user == nullptr) {
      run();
    } else {
      AsUserOnThread(*user, GroupsOf(*user), run);
    }
    return status;
  }

  // `granary --server unix:SOCKET args...` as `user`.
  CommandResult Cli(const TestUser& user, std::vector<std::string> args) {
    return CliAs(*server_, &user, std::move(args));
  }

  double Metric(std::string_view name) const {
    EXPECT_TRUE(server_->WaitForWriteBehind().ok());
    absl::StatusOr<double> value = server_->Metric(name);
    EXPECT_TRUE(value.ok()) << value.status();
    return value.ok() ? *value : -1;
  }

  TempDir roots_;
  TempDir config_dir_;
  TestUser mallory_, bob_, admin_;
  gid_t readers_gid_ = 0, admins_gid_ = 0;
  std::unique_ptr<GranarydProcess> server_;
};

// A prewarm held running by one user (on a thread of that user) until
// Release(); a prewarm of a dataset much larger than what it fetches meanwhile.
class HeldPrewarm {
 public:
  HeldPrewarm(const std::string& address, const TestUser& user, std::vector<gid_t> groups,
              v1::PrewarmRequest request)
      : thread_([this, address, &user, groups, request] {
          AsUserOnThread(user, groups, [&] {
            std::unique_ptr<v1::Granary::Stub> stub = OwnStub(address);
            auto stream = stub->Prewarm(&context_, request);
            v1::PrewarmProgress progress;
            running_ = stream->Read(&progress) && !progress.finished();
            started_.Notify();
            while (stream->Read(&progress)) {
            }
            status_ = stream->Finish();
          });
          if (!started_.HasBeenNotified()) started_.Notify();
        }) {
    started_.WaitForNotification();
  }
  ~HeldPrewarm() { Release(); }

  // Whether it was still running after its first progress.
  bool running() const { return running_; }
  // Cancels it, and waits until it is done.
  grpc::Status Release() {
    if (thread_.joinable()) {
      context_.TryCancel();
      thread_.join();
    }
    return status_;
  }

 private:
  grpc::ClientContext context_;
  absl::Notification started_;
  bool running_ = false;
  grpc::Status status_;
  std::thread thread_;
};

v1::PrewarmRequest PrewarmOf(const std::string& name, uint32_t parallelism = 0) {
  v1::PrewarmRequest request;
  request.set_name(name);
  request.set_parallelism(parallelism);
  return request;
}

// Finding 4: a user asks for 256 workers; she gets the configured 2, and
// granaryd's threads stay bounded. An administrator may ask more.
TEST_F(PrewarmTest, AUsersPrewarmRunsAtMostTheConfiguredParallelism) {
  StartServer("prewarm_parallelism: 2\n");
  if (HasFatalFailure()) return;
  // 300 files of a chunk each: room for 256 workers.
  for (int i = 0; i < 300; ++i) {
    WriteSourceFile(roots_.path() + "/wide", absl::StrCat("f", i), std::string(65536, 'w'));
  }
  AddAsRoot("wide", roots_.path() + "/wide");
  const int before = ThreadsOf(server_->pid());
  std::atomic<bool> sampling = true;
  std::atomic<int> most = before;
  std::thread sampler([&] {
    while (sampling) {
      most = std::max(most.load(), ThreadsOf(server_->pid()));
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
  });
  std::vector<v1::PrewarmProgress> progress;
  grpc::Status prewarmed = PrewarmAs(&mallory_, PrewarmOf("wide", 256), &progress);
  sampling = false;
  sampler.join();
  ASSERT_TRUE(prewarmed.ok()) << prewarmed.error_message();
  ASSERT_FALSE(progress.empty());
  EXPECT_EQ(progress.back().chunks_done(), 300u);
  const std::string log = server_->log();
  EXPECT_TRUE(absl::StrContains(log,
                                "prewarming 300 files of dataset 'wide' (this node's share) "
                                "with 2 workers"))
      << log;
  // The prewarm's workers, and a few threads of gRPC's for the call.
  EXPECT_LE(most - before, 12) << "threads grew from " << before << " to " << most;
  ReportAttack({"2.4", "a user asks a prewarm of 300 chunks with parallelism 256", "Unix socket",
                "runs with prewarm_parallelism (2) workers; threads bounded",
                absl::StrCat("ran with 2 workers; granaryd's threads went from ", before, " to ",
                             most.load(), " at most")});

  // An administrator's prewarm is an administrator's act: more workers.
  ASSERT_TRUE(server_->WaitForWriteBehind().ok());
  AddAsRoot("wide-again", roots_.path() + "/wide");
  progress.clear();
  grpc::Status by_admin = PrewarmAs(&admin_, PrewarmOf("wide-again", 16), &progress);
  ASSERT_TRUE(by_admin.ok()) << by_admin.error_message();
  EXPECT_TRUE(absl::StrContains(server_->log(),
                                "dataset 'wide-again' (this node's share) with 16 "
                                "workers"));
}

// Finding 4: one user starts prewarm after prewarm; past max_prewarms_per_user
// they are refused, and past max_prewarms another user's too, while an
// administrator's still runs.
TEST_F(PrewarmTest, HowManyPrewarmsUsersRunAtOnceIsBounded) {
  // A user's share as large as the capacity, so that nothing but a
  // cancellation ends the held prewarms.
  StartServer(
      "prewarm_parallelism: 1\nmax_prewarms_per_user: 1\nmax_prewarms: 1\ncapacity: 64GiB\n"
      "prewarm_user_share: 1\n");
  if (HasFatalFailure()) return;
  WriteSparseFile(roots_.path() + "/long", "huge.bin", uint64_t{16} << 30);
  AddAsRoot("long", roots_.path() + "/long");
  WriteSourceFile(roots_.path() + "/small", "a.txt", "small\n");
  AddAsRoot("small", roots_.path() + "/small");

  const int before = ThreadsOf(server_->pid());
  HeldPrewarm held(server_->socket_address(), mallory_, GroupsOf(mallory_), PrewarmOf("long", 256));
  ASSERT_TRUE(held.running()) << "the held prewarm ended before the test";
  int refused = 0;
  std::string per_user_error;
  AsUserOnThread(mallory_, GroupsOf(mallory_), [&] {
    for (int i = 0; i < 9; ++i) {
      std::vector<v1::PrewarmProgress> progress;
      grpc::Status more =
          Prewarm(OwnStub(server_->socket_address()).get(), PrewarmOf("small", 256), &progress);
      if (more.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) ++refused;
      per_user_error = more.error_message();
    }
  });
  const int during = ThreadsOf(server_->pid());
  EXPECT_EQ(refused, 9) << per_user_error;
  EXPECT_TRUE(absl::StrContains(per_user_error, "max_prewarms_per_user: 1")) << per_user_error;
  EXPECT_LE(during - before, 12) << "threads grew from " << before << " to " << during;
  ReportAttack({"2.4", "a user runs ten prewarms at once, each asking parallelism 256",
                "Unix socket", "RESOURCE_EXHAUSTED naming max_prewarms_per_user past it",
                absl::StrCat("9 of 9 refused: ", per_user_error, " (threads ", before, " -> ",
                             during, ")")});

  std::vector<v1::PrewarmProgress> progress;
  grpc::Status by_bob = PrewarmAs(&bob_, PrewarmOf("small"), &progress);
  EXPECT_EQ(by_bob.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << by_bob.error_message();
  EXPECT_TRUE(absl::StrContains(by_bob.error_message(), "max_prewarms: 1"))
      << by_bob.error_message();
  ReportAttack({"2.4", "another user prewarms while users run max_prewarms (1) prewarms",
                "Unix socket", "RESOURCE_EXHAUSTED naming max_prewarms", by_bob.error_message()});

  progress.clear();
  grpc::Status by_admin = PrewarmAs(&admin_, PrewarmOf("small"), &progress);
  EXPECT_TRUE(by_admin.ok()) << by_admin.error_message();
  EXPECT_TRUE(held.running());
  held.Release();
  // Once hers has ended, she may prewarm again.
  for (int i = 0; i < 100 && Metric("granary_prewarm_running") > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  progress.clear();
  grpc::Status again = PrewarmAs(&mallory_, PrewarmOf("small"), &progress);
  EXPECT_TRUE(again.ok()) << again.error_message();
}

// Finding 5: a user prewarms a dataset she may not read, or only part of.
TEST_F(PrewarmTest, AUserPrewarmsOnlyWhatSheMayRead) {
  StartServer("");
  if (HasFatalFailure()) return;
  const std::string mixed = roots_.path() + "/mixed";
  WriteSourceFile(mixed, "public.bin", std::string(4096, 'p'));
  WriteSourceFile(mixed, "secret.bin", std::string(4096, 's'));
  WriteSourceFile(mixed, "private/inner.bin", std::string(4096, 'i'));
  ASSERT_EQ(::chmod((mixed + "/secret.bin").c_str(), 0600), 0);
  ASSERT_EQ(::chmod((mixed + "/private").c_str(), 0700), 0);
  AddAsRoot("mixed", mixed);
  const std::string locked = roots_.path() + "/locked";
  WriteSourceFile(locked, "f1.bin", std::string(4096, 'l'));
  WriteSourceFile(locked, "f2.bin", std::string(4096, 'l'));
  ASSERT_EQ(::chmod(locked.c_str(), 0700), 0);
  AddAsRoot("locked", locked);

  std::vector<v1::PrewarmProgress> progress;
  grpc::Status none = PrewarmAs(&mallory_, PrewarmOf("locked"), &progress);
  EXPECT_EQ(none.error_code(), grpc::StatusCode::PERMISSION_DENIED) << none.error_message();
  EXPECT_TRUE(absl::StrContains(none.error_message(), "may read none of the 2 files"))
      << none.error_message();
  EXPECT_EQ(Metric("granary_store_chunks"), 0);
  EXPECT_TRUE(absl::StrContains(server_->log(), "Prewarm 'locked': PERMISSION_DENIED"));
  ReportAttack({"2.5", "a user prewarms a dataset in a directory she may not search", "Unix socket",
                "PERMISSION_DENIED naming a file; nothing cached", none.error_message()});

  progress.clear();
  v1::PrewarmRequest secret = PrewarmOf("mixed");
  secret.add_paths("secret.bin");
  grpc::Status named = PrewarmAs(&mallory_, secret, &progress);
  EXPECT_EQ(named.error_code(), grpc::StatusCode::PERMISSION_DENIED) << named.error_message();
  EXPECT_TRUE(absl::StrContains(named.error_message(), "'secret.bin' is not readable"))
      << named.error_message();
  EXPECT_EQ(Metric("granary_store_chunks"), 0);

  // The whole of "mixed": what she may read, and a word on the rest.
  CommandResult partial = Cli(mallory_, {"prewarm", "mixed"});
  EXPECT_TRUE(absl::StrContains(partial.stdout_text, "2 files left out: the caller may not read"))
      << partial.stdout_text << partial.stderr_text;
  EXPECT_EQ(Metric("granary_store_chunks"), 1);
  ReportAttack({"2.5", "a user prewarms a dataset of which she may read one file in three",
                "Unix socket", "only that file cached; the others counted as left out",
                absl::StrCat(Metric("granary_store_chunks"), " chunk cached; ",
                             FirstLine(partial.stdout_text.substr(
                                 partial.stdout_text.find("2 files left out"))))});

  // An administrator's prewarm warms it all.
  progress.clear();
  grpc::Status by_admin = PrewarmAs(&admin_, PrewarmOf("mixed"), &progress);
  EXPECT_TRUE(by_admin.ok()) << by_admin.error_message();
  EXPECT_EQ(Metric("granary_store_chunks"), 3);
}

// Finding 5: a user's prewarms would fill the cache and crowd the others'
// data out; they stop at prewarm_user_share.
TEST_F(PrewarmTest, AUsersPrewarmsStopAtHerShareOfTheCache) {
  StartServer("capacity: 64MiB\nprewarm_user_share: 0.25\n");
  if (HasFatalFailure()) return;
  for (int i = 0; i < 8; ++i) {
    WriteSparseFile(roots_.path() + "/big", absl::StrCat("f", i, ".bin"), 4 << 20);
  }
  AddAsRoot("big", roots_.path() + "/big");

  std::vector<v1::PrewarmProgress> progress;
  grpc::Status stopped = PrewarmAs(&mallory_, PrewarmOf("big"), &progress);
  EXPECT_EQ(stopped.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << stopped.error_message();
  EXPECT_TRUE(absl::StrContains(stopped.error_message(), "prewarm_user_share: 0.25 of 64"))
      << stopped.error_message();
  const double held = Metric("granary_store_used_bytes");
  EXPECT_LE(held, 16 << 20);
  EXPECT_GT(held, 0);
  ReportAttack({"2.5", "a user prewarms 32 MiB into a 64 MiB cache", "Unix socket",
                "stops at prewarm_user_share (16 MiB), RESOURCE_EXHAUSTED naming it",
                absl::StrCat(stopped.error_message(), " (", held / (1 << 20), " MiB cached)")});
  // Again: nothing more.
  progress.clear();
  EXPECT_EQ(PrewarmAs(&mallory_, PrewarmOf("big"), &progress).error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(Metric("granary_store_used_bytes"), held);

  // An administrator's prewarm counts against no share.
  progress.clear();
  grpc::Status by_admin = PrewarmAs(&admin_, PrewarmOf("big"), &progress);
  EXPECT_TRUE(by_admin.ok()) << by_admin.error_message();
  EXPECT_EQ(Metric("granary_store_used_bytes"), 32 << 20);
}

}  // namespace
}  // namespace granary::testing
