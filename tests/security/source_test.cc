// The source side of the trust boundary, attacked by local users through a
// real granaryd, real allow_other mounts and `granary cat`:
//  - finding 4 and its variants: a user who can write in a registered source
//    swaps a directory or a file for a symlink to a root-only one, or renames
//    another directory over one, with sizes and mtimes forged by truncate and
//    touch; every read fails with ESTALE (FAILED_PRECONDITION) and never
//    yields the other file's bytes, whether granaryd or granary-fuse itself
//    reads the source;
//  - permissions from the source: the mount shows each entry's owner, group
//    and mode and the kernel enforces them (default_permissions).
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "tests/fuse/fuse_mount.h"
#include "tests/security/security_support.h"
#include "tests/support/granaryd_process.h"

namespace granary::testing {
namespace {

constexpr char kSecret[] = "root-only: the private key of the whole cluster\n";
constexpr char kOtherBytes[] = "another file of alice, not the registered one\n";
// The mtime the root-only file has and the attacker forges.
constexpr char kForgedMtime[] = "@1600000000";

// The first line of `text`, for the table.
std::string FirstLine(const std::string& text) { return text.substr(0, text.find('\n')); }

// One granaryd, a source owned by alice holding decoys of a root-only file
// (same name, size and mtime), registered as dataset "ds" by root, and an
// allow_other mount of it.
class SourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (useradd, setpriv, allow_other)";
    absl::StatusOr<TestUser> alice = EnsureTestUser("granary-src-alice");
    absl::StatusOr<TestUser> bob = EnsureTestUser("granary-src-bob");
    ASSERT_TRUE(alice.ok()) << alice.status();
    ASSERT_TRUE(bob.ok()) << bob.status();
    alice_ = *alice;
    bob_ = *bob;
    // Users must reach the source and the root-only directory's name.
    ASSERT_EQ(::chmod(base_.path().c_str(), 0755), 0);

    rootonly_ = base_.path() + "/rootonly";
    ASSERT_EQ(::mkdir(rootonly_.c_str(), 0700), 0);
    std::ofstream(rootonly_ + "/secret") << kSecret;
    ASSERT_EQ(::chmod((rootonly_ + "/secret").c_str(), 0600), 0);
    RunOk(
        granary::testing::Run({"/usr/bin/touch", "-m", "-d", kForgedMtime, rootonly_ + "/secret"}));

    source_ = base_.path() + "/src";
    ASSERT_EQ(::mkdir(source_.c_str(), 0755), 0);
    ASSERT_EQ(::chown(source_.c_str(), alice_.uid, alice_.gid), 0);
    // Decoys: alice's files named like the root-only one, with its size and
    // mtime forged.
    for (const char* dir : {"d", "f", "g", "h"}) ForgeDecoy(source_ + "/" + dir + "/secret");
    AsAlice({"/usr/bin/mkdir", source_ + "/private_dir"});
    AsAlice({"/usr/bin/chmod", "0700", source_ + "/private_dir"});
    AsAlice({"/usr/bin/sh", "-c", "echo inner > " + source_ + "/private_dir/inner"});
    AsAlice({"/usr/bin/sh", "-c", "echo alice only > " + source_ + "/private"});
    AsAlice({"/usr/bin/chmod", "0600", source_ + "/private"});

    absl::StatusOr<std::unique_ptr<GranarydProcess>> server = GranarydProcess::Start();
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    RunOk(granary::testing::Run(
        {CliPath(), "--server", server_->socket_address(), "dataset", "add", "ds", source_}));
    absl::StatusOr<std::unique_ptr<FuseMount>> mount = FuseMount::Start(
        server_->socket_address(),
        {"-o", "allow_other", "--rpc-timeout-ms", "3000", "--retry-server-ms", "60000"}, "ds");
    ASSERT_TRUE(mount.ok()) << mount.status();
    mount_ = *std::move(mount);
    ASSERT_EQ(::chmod(std::filesystem::path(mount_->path()).parent_path().c_str(), 0755), 0);
    mounted_ = mount_->path() + "/ds";
  }

  static void RunOk(const absl::StatusOr<CommandResult>& result) {
    ASSERT_TRUE(result.ok()) << result.status();
    ASSERT_EQ(result->exit_code, 0) << result->stderr_text;
  }
  void AsAlice(const std::vector<std::string>& argv) { RunOk(RunAs(alice_, argv)); }

  // Alice makes `path` with the root-only file's size and mtime.
  void ForgeDecoy(const std::string& path) {
    AsAlice({"/usr/bin/mkdir", "-p", std::filesystem::path(path).parent_path()});
    AsAlice({"/usr/bin/truncate", "-s", std::to_string(sizeof(kSecret) - 1), path});
    AsAlice({"/usr/bin/touch", "-m", "-d", kForgedMtime, path});
  }

  // Reads `path` with cat as `user` (root when null), expects a failure with
  // `error` (strerror text) and neither the secret nor `other` bytes, and
  // reports the attack.
  void ExpectReadRefused(const TestUser* user, const std::string& path, const std::string& error,
                         const std::string& finding, const std::string& attack,
                         const std::string& expected) {
    absl::StatusOr<CommandResult> read = user != nullptr
                                             ? RunAs(*user, {"/usr/bin/cat", path})
                                             : granary::testing::Run({"/usr/bin/cat", path});
    ASSERT_TRUE(read.ok()) << read.status();
    const bool leaked = read->stdout_text.find(kSecret) != std::string::npos ||
                        read->stdout_text.find(kOtherBytes) != std::string::npos;
    EXPECT_FALSE(leaked) << path << " gave: " << read->stdout_text;
    EXPECT_NE(read->exit_code, 0) << path;
    EXPECT_NE(read->stderr_text.find(error), std::string::npos) << read->stderr_text;
    ReportAttack({finding,
                  absl::StrCat(attack, "; ", user != nullptr ? user->name : "root", " reads ",
                               path.substr(mount_->path().size() + 1), " through the mount"),
                  "mount (allow_other)", expected,
                  leaked ? "the bytes of another file" : FirstLine(read->stderr_text)});
  }

  // `granary cat ds/<path>` as root: an error naming the file and holding
  // `why`, never the bytes.
  void ExpectCatRefused(const std::string& path, const std::string& why, const std::string& finding,
                        const std::string& attack) {
    absl::StatusOr<CommandResult> cat = granary::testing::Run(
        {CliPath(), "--server", server_->socket_address(), "cat", "ds/" + path});
    ASSERT_TRUE(cat.ok()) << cat.status();
    const bool leaked = cat->stdout_text.find(kSecret) != std::string::npos ||
                        cat->stdout_text.find(kOtherBytes) != std::string::npos;
    EXPECT_FALSE(leaked) << cat->stdout_text;
    EXPECT_NE(cat->exit_code, 0);
    EXPECT_NE(cat->stderr_text.find("'" + path + "'"), std::string::npos) << cat->stderr_text;
    EXPECT_NE(cat->stderr_text.find(why), std::string::npos) << cat->stderr_text;
    ReportAttack({finding, absl::StrCat(attack, "; root runs granary cat ds/", path), "Unix socket",
                  "FAILED_PRECONDITION naming the file, never the bytes",
                  leaked ? "the bytes of another file" : FirstLine(cat->stderr_text)});
  }

  TempDir base_;
  TestUser alice_, bob_;
  std::string rootonly_;
  std::string source_;
  std::unique_ptr<GranarydProcess> server_;
  std::unique_ptr<FuseMount> mount_;  // Destroyed (unmounted) before the server.
  std::string mounted_;
};

constexpr char kStale[] = "Stale file handle";
constexpr char kThroughSymlink[] = "passes through a symlink";
constexpr char kEstaleNotTheSecret[] = "ESTALE, never the root-only bytes";

TEST_F(SourceTest, DirectorySwappedForASymlinkToARootOnlyDirectoryReadsAsStale) {
  AsAlice({"/usr/bin/mv", source_ + "/d", source_ + "/d.registered"});
  AsAlice({"/usr/bin/ln", "-s", rootonly_, source_ + "/d"});
  const std::string attack =
      "alice, who can write in the source, swaps directory d for a symlink to a root-only "
      "directory holding 'secret' (size and mtime forged with truncate and touch)";
  ExpectReadRefused(&alice_, mounted_ + "/d/secret", kStale, "4", attack, kEstaleNotTheSecret);
  ExpectReadRefused(nullptr, mounted_ + "/d/secret", kStale, "4", attack, kEstaleNotTheSecret);
  ExpectCatRefused("d/secret", kThroughSymlink, "4", attack);
}

TEST_F(SourceTest, FileSwappedForASymlinkToARootOnlyFileReadsAsStale) {
  AsAlice({"/usr/bin/rm", source_ + "/f/secret"});
  AsAlice({"/usr/bin/ln", "-s", rootonly_ + "/secret", source_ + "/f/secret"});
  const std::string attack =
      "alice swaps file f/secret (size and mtime forged) for a symlink to a root-only file";
  ExpectReadRefused(&alice_, mounted_ + "/f/secret", kStale, "4", attack, kEstaleNotTheSecret);
  ExpectReadRefused(nullptr, mounted_ + "/f/secret", kStale, "4", attack, kEstaleNotTheSecret);
  ExpectCatRefused("f/secret", kThroughSymlink, "4", attack);
}

TEST_F(SourceTest, DirectoryRenamedOverAnotherReadsAsStale) {
  // Another directory of alice's with a file of the same name, size and
  // mtime but other bytes, renamed into the registered one's place.
  AsAlice({"/usr/bin/mkdir", source_ + "/e"});
  AsAlice({"/usr/bin/sh", "-c",
           absl::StrCat("printf '%s' '", kOtherBytes, "' > ", source_, "/e/secret")});
  AsAlice({"/usr/bin/truncate", "-s", std::to_string(sizeof(kSecret) - 1), source_ + "/e/secret"});
  AsAlice({"/usr/bin/touch", "-m", "-d", kForgedMtime, source_ + "/e/secret"});
  AsAlice({"/usr/bin/mv", source_ + "/g", source_ + "/g.registered"});
  AsAlice({"/usr/bin/mv", source_ + "/e", source_ + "/g"});
  const std::string attack =
      "alice renames another directory over g, its 'secret' with the registered file's size and "
      "mtime but other bytes (identity mismatch: inode, ctime)";
  ExpectReadRefused(&alice_, mounted_ + "/g/secret", kStale, "new", attack,
                    "ESTALE, never the other file's bytes");
  ExpectCatRefused("g/secret", "is not the file the manifest recorded (inode", "new", attack);
}

TEST_F(SourceTest, WithTheServerDownGranaryFuseRefusesTheSwapItself) {
  AsAlice({"/usr/bin/mv", source_ + "/h", source_ + "/h.registered"});
  AsAlice({"/usr/bin/ln", "-s", rootonly_, source_ + "/h"});
  ASSERT_TRUE(server_->Kill().ok());
  const std::string attack =
      "granaryd is down, so granary-fuse (root) reads the source itself; alice has swapped "
      "directory h for a symlink to a root-only directory (size and mtime forged)";
  ExpectReadRefused(&alice_, mounted_ + "/h/secret", kStale, "4", attack, kEstaleNotTheSecret);
  ExpectReadRefused(nullptr, mounted_ + "/h/secret", kStale, "4", attack, kEstaleNotTheSecret);
  EXPECT_NE(mount_->log().find("reading sources directly"), std::string::npos) << mount_->log();
  EXPECT_NE(mount_->log().find("symlink"), std::string::npos) << mount_->log();
}

TEST_F(SourceTest, TheMountShowsTheSourcesOwnersAndModesAndTheKernelEnforcesThem) {
  for (const std::string path : {"", "/private", "/private_dir", "/private_dir/inner", "/d"}) {
    struct stat source;
    ASSERT_EQ(::lstat((source_ + path).c_str(), &source), 0) << path;
    const std::string want =
        absl::StrFormat("%u %u %o", source.st_uid, source.st_gid, source.st_mode & 07777);
    absl::StatusOr<CommandResult> shown =
        RunAs(bob_, {"/usr/bin/stat", "-c", "%u %g %a", mounted_ + path});
    ASSERT_TRUE(shown.ok()) << shown.status();
    // Bob may stat inside private_dir only if he can search it: he cannot.
    if (path == "/private_dir/inner") {
      EXPECT_NE(shown->exit_code, 0);
      EXPECT_NE(shown->stderr_text.find("Permission denied"), std::string::npos)
          << shown->stderr_text;
      continue;
    }
    EXPECT_EQ(shown->stdout_text, want + "\n") << path << ": " << shown->stderr_text;
  }

  absl::StatusOr<CommandResult> own = RunAs(alice_, {"/usr/bin/cat", mounted_ + "/private"});
  ASSERT_TRUE(own.ok()) << own.status();
  EXPECT_EQ(own->exit_code, 0) << own->stderr_text;
  EXPECT_EQ(own->stdout_text, "alice only\n");

  const std::string mode_rule = "EACCES, as the source's owner and mode refuse it";
  ExpectReadRefused(&bob_, mounted_ + "/private", "Permission denied", "new",
                    "bob reads alice's 0600 file", mode_rule);
  ExpectReadRefused(&bob_, mounted_ + "/private_dir/inner", "Permission denied", "new",
                    "bob reads a 0644 file inside alice's 0700 directory", mode_rule);
  absl::StatusOr<CommandResult> listing = RunAs(bob_, {"/usr/bin/ls", mounted_ + "/private_dir"});
  ASSERT_TRUE(listing.ok()) << listing.status();
  EXPECT_NE(listing->exit_code, 0);
  EXPECT_EQ(listing->stdout_text, "");
  EXPECT_NE(listing->stderr_text.find("Permission denied"), std::string::npos)
      << listing->stderr_text;
  ReportAttack({"new", "bob lists alice's 0700 directory through the mount", "mount (allow_other)",
                mode_rule, FirstLine(listing->stderr_text)});
}

}  // namespace
}  // namespace granary::testing
