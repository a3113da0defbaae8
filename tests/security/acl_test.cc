// POSIX ACLs of a source, attacked by local users (finding 1 of the second
// review): an entry `user:bob:---` on a file everyone else may read, or on a
// directory above it, keeps bob out over granaryd's socket (`granary cat`,
// cold and cached) and through an allow_other mount, where the kernel
// enforces the ACLs the mount shows; entries that grant (a named user or
// group on a private file) let exactly those users in, as the source does.
// The ACLs are set with setfacl and read back with getfacl, as users do.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/fuse/fuse_mount.h"
#include "tests/security/security_support.h"
#include "tests/server/server_test_util.h"
#include "tests/support/granaryd_process.h"

namespace granary::testing {
namespace {

constexpr char kReaders[] = "granary-acl-readers";
constexpr char kTeam[] = "granary-acl-team";

std::string FirstLine(const std::string& text) { return text.substr(0, text.find('\n')); }

// A file of the source, who may read it, and the bytes it holds.
struct AclFile {
  std::string path;
  std::string bytes;
  bool bob_reads;
  bool carol_reads;
};

// One granaryd run by root whose socket group is kReaders, a root-owned
// source whose ACLs single out bob (refused where others read, granted where
// others are not) and the team carol is in, registered as dataset "ds".
class AclTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "creating users needs root";
    for (auto [user, name, groups] :
         {std::tuple{&bob_, "granary-acl-bob", std::vector<std::string>{kReaders}},
          std::tuple{&carol_, "granary-acl-carol", std::vector<std::string>{kReaders, kTeam}}}) {
      absl::StatusOr<TestUser> made = EnsureTestUser(name, groups);
      ASSERT_TRUE(made.ok()) << made.status();
      *user = *made;
    }
    ASSERT_EQ(::chmod(roots_.path().c_str(), 0755), 0);
    source_ = roots_.path() + "/ds";
    files_ = {
        {"open.bin", "everyone but bob\n", false, true},
        {"granted.bin", "root's, and bob's by ACL\n", true, false},
        {"team.bin", "root's, and the team's by ACL\n", false, true},
        {"closed/inner.bin", "in a directory bob may not search\n", false, true},
        {"shared/plain.bin", "below a default ACL\n", true, true},
    };
    for (const AclFile& file : files_) WriteSourceFile(source_, file.path, file.bytes);
    ASSERT_EQ(::chmod(source_.c_str(), 0755), 0);
    ASSERT_EQ(::chmod((source_ + "/granted.bin").c_str(), 0600), 0);
    ASSERT_EQ(::chmod((source_ + "/team.bin").c_str(), 0600), 0);
    SetAcl({"-m", "u:" + bob_.name + ":---", source_ + "/open.bin"});
    SetAcl({"-m", "u:" + bob_.name + ":r--", source_ + "/granted.bin"});
    SetAcl({"-m", std::string("g:") + kTeam + ":r--", source_ + "/team.bin"});
    SetAcl({"-m", "u:" + bob_.name + ":---", source_ + "/closed"});
    SetAcl({"-d", "-m", "u:" + bob_.name + ":r-x", source_ + "/shared"});

    absl::StatusOr<std::unique_ptr<GranarydProcess>> server = StartSharedGranaryd(
        roots_.path(), config_dir_.path(), absl::StrCat("socket_group: ", kReaders, "\n"));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    ASSERT_EQ(Cli(nullptr, {"dataset", "add", "ds", source_}).exit_code, 0);
  }

  static void SetAcl(std::vector<std::string> args) {
    args.insert(args.begin(), "/usr/bin/setfacl");
    absl::StatusOr<CommandResult> set = granary::testing::Run(args);
    ASSERT_TRUE(set.ok()) << set.status();
    ASSERT_EQ(set->exit_code, 0) << set->stderr_text;
  }

  // `granary --server unix:SOCKET args...` as `user` (root when null).
  CommandResult Cli(const TestUser* user, std::vector<std::string> args) {
    return CliAs(*server_, user, std::move(args));
  }

  // Every file read by bob and carol with `argv_of(file)`: the bytes exactly
  // when the source's ACLs let them read it, else `refusal`; each refusal
  // of bob is reported.
  template <typename ArgvOf>
  void ExpectReadsAsTheSourceDecides(ArgvOf argv_of, const std::string& channel,
                                     const std::string& how, const std::string& refusal) {
    for (const AclFile& file : files_) {
      for (const auto& [user, may] :
           {std::pair{&bob_, file.bob_reads}, std::pair{&carol_, file.carol_reads}}) {
        absl::StatusOr<CommandResult> read = RunAs(*user, argv_of(file));
        ASSERT_TRUE(read.ok()) << read.status();
        if (may) {
          EXPECT_EQ(read->exit_code, 0)
              << user->name << " " << file.path << ": " << read->stderr_text;
          EXPECT_EQ(read->stdout_text, file.bytes) << user->name << " " << file.path;
          continue;
        }
        EXPECT_NE(read->exit_code, 0) << user->name << " read " << file.path;
        EXPECT_EQ(read->stdout_text, "") << user->name << " read " << file.path;
        EXPECT_TRUE(absl::StrContains(read->stderr_text, refusal)) << read->stderr_text;
        if (user == &bob_) {
          ReportAttack(
              {"2.1",
               absl::StrCat("bob reads ", file.path, ", which an ACL entry of the source (",
                            file.path == "closed/inner.bin" ? "u:bob:--- on closed/"
                            : file.path == "open.bin"       ? "u:bob:--- on a 0644 file"
                                                            : "granting others only",
                            ") keeps from him, ", how),
               channel, "refused, as in the source", FirstLine(read->stderr_text)});
        }
      }
    }
  }

  TempDir roots_;
  TempDir config_dir_;
  std::string source_;
  std::vector<AclFile> files_;
  TestUser bob_, carol_;
  std::unique_ptr<GranarydProcess> server_;
};

TEST_F(AclTest, GranaryCatIsJudgedByTheSourcesAcls) {
  auto cat = [&](const AclFile& file) {
    return std::vector<std::string>{CliPath(), "--server", server_->socket_address(), "cat",
                                    "ds/" + file.path};
  };
  ExpectReadsAsTheSourceDecides(cat, "Unix socket", "with granary cat (cold)", "as in the source");
  for (const AclFile& file : files_) {
    CommandResult by_root = Cli(nullptr, {"cat", "ds/" + file.path});
    ASSERT_EQ(by_root.exit_code, 0) << by_root.stderr_text;
  }
  ExpectReadsAsTheSourceDecides(cat, "Unix socket", "with granary cat (cached by root's read)",
                                "as in the source");
}

TEST_F(AclTest, TheMountShowsTheSourcesAclsAndTheKernelEnforcesThem) {
  absl::StatusOr<std::unique_ptr<FuseMount>> mount =
      FuseMount::Start(server_->socket_address(), {"-o", "allow_other"}, "ds");
  ASSERT_TRUE(mount.ok()) << mount.status();
  ASSERT_EQ(::chmod(std::filesystem::path((*mount)->path()).parent_path().c_str(), 0755), 0);
  const std::string mounted = (*mount)->path() + "/ds";

  // getfacl shows the same ACLs (access and default) and modes on both sides.
  for (const std::string path :
       {"open.bin", "granted.bin", "team.bin", "closed", "shared", "shared/plain.bin"}) {
    absl::StatusOr<CommandResult> in_source = granary::testing::Run(
        {"/usr/bin/getfacl", "--omit-header", "--numeric", source_ + "/" + path});
    absl::StatusOr<CommandResult> through_mount = granary::testing::Run(
        {"/usr/bin/getfacl", "--omit-header", "--numeric", mounted + "/" + path});
    ASSERT_TRUE(in_source.ok() && through_mount.ok());
    ASSERT_EQ(through_mount->exit_code, 0) << through_mount->stderr_text;
    EXPECT_EQ(through_mount->stdout_text, in_source->stdout_text) << path;
  }

  ExpectReadsAsTheSourceDecides(
      [&](const AclFile& file) {
        return std::vector<std::string>{"/usr/bin/cat", mounted + "/" + file.path};
      },
      "mount (allow_other)", "through the mount", "Permission denied");
}

}  // namespace
}  // namespace granary::testing
