// Permissions the source takes away, attacked by a local user through a real
// granaryd and a real allow_other mount (findings 2 and 9 of the second
// trust-boundary review):
//  - finding 2: after a chmod 600 or a removal and a refresh, bob reads the
//    cached bytes through the older version (a raw ReadChunk naming it),
//    lists the older versions, keeps reading the older version past its
//    grace, and through the mount opens a file of the older version from a
//    directory descriptor he held since before the refresh;
//  - finding 9: a change of metadata alone (a hard link, a chmod, an
//    attribute) in the source, which nobody refreshes: reads of the
//    unchanged bytes go on, and granaryd refreshes the dataset itself, so
//    that the chmod takes effect.
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/dataset/chunk_key.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel_posix.h"
#include "gtest/gtest.h"
#include "tests/fuse/fuse_mount.h"
#include "tests/security/security_support.h"
#include "tests/server/server_test_util.h"
#include "tests/support/granaryd_process.h"

namespace granary::testing {
namespace {

namespace fs = std::filesystem;

constexpr char kReaders[] = "granary-rev-readers";
constexpr char kAdmins[] = "granary-rev-admins";
constexpr char kSecret[] = "taken away 51c2e8\n";
constexpr uint32_t kChunk = 1 << 20;

std::string FirstLine(const std::string& text) { return text.substr(0, text.find('\n')); }

// A granaryd run by root whose socket group is kReaders, with older
// versions kept `GraceSeconds()` and datasets a read finds changed refreshed
// at most once a second, and dataset "ds" of a source holding
//   open.txt, revoked.txt (kSecret), removed.txt, dir/kept.txt,
//   dir/later.txt (kSecret), big.bin (three chunks), all 0644.
// bob is a reader.
class RevocationTest : public SharedNodeTest {
 protected:
  virtual int GraceSeconds() const { return 300; }

  void SetUp() override {
    SetUpSharedNode("granary-rev-bob", kReaders, kAdmins);
    if (IsSkipped() || HasFatalFailure()) return;
    WriteSourceFile(source_, "open.txt", "open to all\n");
    WriteSourceFile(source_, "revoked.txt", kSecret);
    WriteSourceFile(source_, "removed.txt", kSecret);
    WriteSourceFile(source_, "dir/kept.txt", "kept\n");
    WriteSourceFile(source_, "dir/later.txt", kSecret);
    WriteSourceFile(source_, "big.bin", PatternBytes(3 * kChunk - 100, 9));
    for (const char* path : {"", "/dir"}) ::chmod((source_ + path).c_str(), 0755);

    StartNodeWithDataset(absl::StrCat("socket_group: ", kReaders, "\nadmin_group: ", kAdmins,
                                      "\nversion_grace_seconds: ", GraceSeconds(),
                                      "\nsource_refresh_interval_seconds: 1\n"));
    if (HasFatalFailure()) return;
    first_ = Dataset(server_->SocketStub().get());
    ids_ = FileIds(first_.version());
  }

  // `granary --server unix:SOCKET args...` as `user` (root when null).
  CommandResult Cli(const TestUser* user, std::vector<std::string> args) {
    return CliAs(*server_, user, std::move(args));
  }

  // A stub whose connection to granaryd bob made: the server sees bob.
  std::unique_ptr<v1::Granary::Stub> BobsStub() {
    int fd = -1;
    AsUserOnThread(bob_, {bob_.gid, readers_gid_},
                   [&] { fd = ConnectUnix(server_->socket_path(), SOCK_STREAM); });
    EXPECT_GE(fd, 0) << "bob cannot connect to granaryd";
    return v1::Granary::NewStub(grpc::CreateInsecureChannelFromFd("granaryd", fd));
  }

  static v1::DatasetInfo Dataset(v1::Granary::Stub* stub) {
    v1::GetDatasetRequest request;
    request.set_name("ds");
    v1::DatasetInfo info;
    grpc::ClientContext context;
    grpc::Status status = stub->GetDataset(&context, request, &info);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return info;
  }

  // The file ids of `version`'s files, by path.
  std::map<std::string, uint64_t> FileIds(uint64_t version) {
    std::vector<v1::ManifestEntry> entries;
    grpc::Status listed = GetManifest(server_->SocketStub().get(), "ds", version, &entries);
    EXPECT_TRUE(listed.ok()) << listed.error_message();
    std::map<std::string, uint64_t> ids;
    for (size_t id = 0; id < entries.size(); ++id) ids[entries[id].path()] = id;
    return ids;
  }

  // Refreshes "ds" as root; returns the new current version.
  uint64_t Refresh() {
    EXPECT_EQ(Cli(nullptr, {"dataset", "refresh", "ds"}).exit_code, 0);
    return Dataset(server_->SocketStub().get()).version();
  }

  // Waits up to `timeout` for "ds" to be at another version than `version`.
  bool RefreshedFrom(uint64_t version, std::chrono::seconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (Dataset(server_->SocketStub().get()).version() == version) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return true;
  }

  v1::DatasetInfo first_;
  std::map<std::string, uint64_t> ids_;  // Of the first version.
};

TEST_F(RevocationTest, WhatTheSourceTookAwayIsRefusedInOlderVersionsToo) {
  // The bytes are cached, and bob reads them while he may.
  ASSERT_EQ(Cli(nullptr, {"prewarm", "ds"}).exit_code, 0);
  std::unique_ptr<v1::Granary::Stub> bob = BobsStub();
  ReadResult before = ReadChunk(bob.get(), first_.version(), ids_.at("revoked.txt"), 0);
  ASSERT_TRUE(before.status.ok()) << before.status.error_message();
  ASSERT_EQ(before.data, kSecret);

  ASSERT_EQ(::chmod((source_ + "/revoked.txt").c_str(), 0600), 0);
  fs::remove(source_ + "/removed.txt");
  const uint64_t second = Refresh();
  ASSERT_NE(second, first_.version());

  ReadResult revoked = ReadChunk(bob.get(), first_.version(), ids_.at("revoked.txt"), 0);
  EXPECT_EQ(revoked.status.error_code(), grpc::StatusCode::PERMISSION_DENIED)
      << revoked.status.error_message();
  EXPECT_FALSE(absl::StrContains(revoked.data, kSecret));
  EXPECT_TRUE(absl::StrContains(revoked.status.error_message(), "not readable"))
      << revoked.status.error_message();
  ReportAttack({"2.2",
                "chmod 600 of a cached file and a refresh; bob reads it through the older "
                "version (raw ReadChunk)",
                "Unix socket", "PERMISSION_DENIED, judged by the current version",
                revoked.data == kSecret ? "the file's bytes" : revoked.status.error_message()});

  ReadResult removed = ReadChunk(bob.get(), first_.version(), ids_.at("removed.txt"), 0);
  EXPECT_EQ(removed.status.error_code(), grpc::StatusCode::PERMISSION_DENIED)
      << removed.status.error_message();
  EXPECT_FALSE(absl::StrContains(removed.data, kSecret));
  ReportAttack({"2.2",
                "a cached file removed from the source and a refresh; bob reads it through the "
                "older version",
                "Unix socket", "PERMISSION_DENIED: no longer a file in its source",
                removed.data == kSecret ? "the file's bytes" : removed.status.error_message()});

  // What the source still grants reads in the older version.
  ReadResult kept = ReadChunk(bob.get(), first_.version(), ids_.at("dir/kept.txt"), 0);
  ASSERT_TRUE(kept.status.ok()) << kept.status.error_message();
  EXPECT_EQ(kept.data, "kept\n");

  // Older versions are an administrator's to list.
  EXPECT_EQ(Dataset(bob.get()).older_versions_size(), 0);
  EXPECT_EQ(Dataset(server_->SocketStub().get()).older_versions_size(), 1);
  CommandResult shown = Cli(&bob_, {"dataset", "show", "ds"});
  EXPECT_EQ(shown.exit_code, 0) << shown.stderr_text;
  EXPECT_FALSE(absl::StrContains(shown.stdout_text, FormatVersion(first_.version())))
      << shown.stdout_text;
  std::vector<v1::ManifestEntry> entries;
  grpc::Status manifest = GetManifest(bob.get(), "ds", first_.version(), &entries);
  EXPECT_EQ(manifest.error_code(), grpc::StatusCode::PERMISSION_DENIED) << manifest.error_message();
  ReportAttack({"2.2", "bob lists the older version (dataset show, GetManifest of it)",
                "Unix socket", "not listed; PERMISSION_DENIED for its manifest",
                absl::StrCat("dataset show lists no older version; ", manifest.error_message())});
}

class ShortGraceRevocationTest : public RevocationTest {
 protected:
  static constexpr int kGraceSeconds = 2;
  int GraceSeconds() const override { return kGraceSeconds; }
};

TEST_F(ShortGraceRevocationTest, ReadsDoNotKeepAnOlderVersionPastItsGrace) {
  std::unique_ptr<v1::Granary::Stub> bob = BobsStub();
  WriteSourceFile(source_, "added.txt", "added\n");
  const auto refreshed = std::chrono::steady_clock::now();
  ASSERT_NE(Refresh(), first_.version());
  // bob reads the older version all along, as the reader of the review did.
  int served = 0;
  bool released = false;
  while (!released &&
         std::chrono::steady_clock::now() - refreshed < std::chrono::seconds(kGraceSeconds + 8)) {
    served += ReadChunk(bob.get(), first_.version(), ids_.at("dir/kept.txt"), 0).status.ok();
    released = Dataset(server_->SocketStub().get()).older_versions_size() == 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  const double after =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - refreshed).count();
  EXPECT_TRUE(released) << "bob's reads kept the older version " << after << " s";
  EXPECT_GT(served, 0);
  ReadResult late = ReadChunk(bob.get(), first_.version(), ids_.at("dir/kept.txt"), 0);
  EXPECT_EQ(late.status.error_code(), grpc::StatusCode::NOT_FOUND) << late.status.error_message();
  ReportAttack({"2.2",
                absl::StrCat("bob reads the older version every 0.25 s to keep it (grace ",
                             kGraceSeconds, " s)"),
                "Unix socket", "released after its grace all the same",
                absl::StrCat("released ", static_cast<int>(after), " s after the refresh, ", served,
                             " reads served before; then: ", late.status.error_message())});
}

TEST_F(RevocationTest, AChangeOfMetadataAloneKeepsReadsAndRefreshesTheDataset) {
  // A backup tool adds a hard link; nobody refreshes. Nothing is cached.
  ASSERT_EQ(::link((source_ + "/big.bin").c_str(), (source_ + "/big.bin.bak").c_str()), 0);
  CommandResult read = Cli(&bob_, {"cat", "ds/big.bin"});
  EXPECT_EQ(read.exit_code, 0) << read.stderr_text;
  EXPECT_TRUE(read.stdout_text == PatternBytes(3 * kChunk - 100, 9)) << FirstLine(read.stderr_text);
  ReportAttack({"2.9", "a hard link added to a source file; bob cats its uncached chunks",
                "Unix socket", "the bytes, unchanged",
                read.exit_code == 0 ? absl::StrCat(read.stdout_text.size(), " bytes, as recorded")
                                    : FirstLine(read.stderr_text)});

  // granaryd noticed, and refreshed the dataset itself.
  ASSERT_TRUE(RefreshedFrom(first_.version(), std::chrono::seconds(10)))
      << "nobody refreshed the dataset";
  const std::string log = server_->log();
  const size_t audit = log.find("audit: granaryd, on a change in the source: RefreshDataset 'ds'");
  ASSERT_NE(audit, std::string::npos) << log;
  ReportAttack({"2.9", "nobody refreshes after the hard link", "granaryd",
                "the dataset refreshed without a person, audited",
                FirstLine(log.substr(log.rfind('\n', audit) + 1))});

  // A chmod 600 nobody refreshes after: bob's next reads find it (the read
  // that notices it is served), and once the refresh it causes is in, he
  // is refused, as the source refuses him.
  const uint64_t before_chmod = Dataset(server_->SocketStub().get()).version();
  ::usleep(20'000);
  ASSERT_EQ(::chmod((source_ + "/revoked.txt").c_str(), 0600), 0);
  CommandResult noticed = Cli(&bob_, {"cat", "ds/revoked.txt"});
  ASSERT_TRUE(RefreshedFrom(before_chmod, std::chrono::seconds(10)))
      << "nobody refreshed the dataset; bob's read: " << noticed.stderr_text << server_->log();
  CommandResult refused = Cli(&bob_, {"cat", "ds/revoked.txt"});
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_FALSE(absl::StrContains(refused.stdout_text, kSecret));
  EXPECT_TRUE(absl::StrContains(refused.stderr_text, "not readable")) << refused.stderr_text;
  ReportAttack({"2.9", "chmod 600 in the source, nobody refreshes; bob cats the file",
                "Unix socket", "PERMISSION_DENIED once granaryd refreshed on its own",
                FirstLine(refused.stderr_text)});

  // A prewarm right after an attribute is set: every file warms, and the
  // audit says so.
  ASSERT_EQ(::setxattr((source_ + "/open.txt").c_str(), "user.note", "x", 1, 0), 0);
  CommandResult prewarm = Cli(nullptr, {"prewarm", "ds"});
  EXPECT_EQ(prewarm.exit_code, 0) << prewarm.stderr_text;
  EXPECT_FALSE(absl::StrContains(prewarm.stdout_text + prewarm.stderr_text, "refresh the dataset"))
      << prewarm.stdout_text << prewarm.stderr_text;
  ReportAttack(
      {"2.9", "an attribute set on a source file, then root prewarms the dataset", "Unix socket",
       "every file warmed",
       prewarm.exit_code == 0 ? "prewarm OK, no file failed" : FirstLine(prewarm.stderr_text)});
}

// The same source through an allow_other mount that granary-fuse serves as
// root.
class MountedRevocationTest : public RevocationTest {
 protected:
  void SetUp() override {
    RevocationTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    absl::StatusOr<std::unique_ptr<FuseMount>> mount = FuseMount::Start(
        server_->socket_address(), {"-o", "allow_other", "--version-grace-seconds", "1"}, "ds");
    ASSERT_TRUE(mount.ok()) << mount.status();
    mount_ = *std::move(mount);
    ASSERT_EQ(::chmod(fs::path(mount_->path()).parent_path().c_str(), 0755), 0);
    mounted_ = mount_->path() + "/ds";
  }

  // openat(`dir`, `name`) as bob: the bytes read, or the errno.
  std::string OpenAtAsBob(int dir, const std::string& name) {
    std::string result;
    AsUserOnThread(bob_, {bob_.gid}, [&] {
      int fd = ::openat(dir, name.c_str(), O_RDONLY);
      if (fd < 0) {
        result = std::strerror(errno);
        return;
      }
      char buffer[256];
      ssize_t n = ::read(fd, buffer, sizeof(buffer));
      result = n < 0 ? std::strerror(errno) : std::string(buffer, static_cast<size_t>(n));
      ::close(fd);
    });
    return result;
  }

  std::unique_ptr<FuseMount> mount_;  // Destroyed (unmounted) before the server.
  std::string mounted_;
};

TEST_F(MountedRevocationTest, NoNewOpenInAnOlderVersionAfterTheSourceTookItAway) {
  // bob holds a directory of the version he found, and reads nothing yet.
  int dir = -1;
  AsUserOnThread(bob_, {bob_.gid},
                 [&] { dir = ::open((mounted_ + "/dir").c_str(), O_RDONLY | O_DIRECTORY); });
  ASSERT_GE(dir, 0) << std::strerror(errno);

  ASSERT_EQ(::chmod((source_ + "/dir/later.txt").c_str(), 0600), 0);
  WriteSourceFile(source_, "marker.txt", "marker\n");
  ASSERT_NE(Refresh(), first_.version());
  bool shown = false;
  for (int i = 0; i < 100 && !shown; ++i) {
    shown = fs::exists(mounted_ + "/marker.txt");
    if (!shown) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(shown) << "the mount never showed the new version";
  // Past the mount's grace: the directory alone holds the older version.
  std::this_thread::sleep_for(std::chrono::seconds(2));

  const std::string later = OpenAtAsBob(dir, "later.txt");
  EXPECT_EQ(later, std::strerror(EACCES));
  EXPECT_FALSE(absl::StrContains(later, kSecret));
  ReportAttack({"2.2",
                "chmod 600 and a refresh; bob opens the file, never read, from a directory "
                "descriptor of the older version he held",
                "mount (allow_other)", "EACCES", later == kSecret ? "the file's bytes" : later});
  // What the source still grants opens there, and the current version
  // refuses as the source does.
  EXPECT_EQ(OpenAtAsBob(dir, "kept.txt"), "kept\n");
  absl::StatusOr<CommandResult> current =
      RunAs(bob_, {"/usr/bin/cat", mounted_ + "/dir/later.txt"});
  ASSERT_TRUE(current.ok()) << current.status();
  EXPECT_NE(current->exit_code, 0);
  ::close(dir);
}

}  // namespace
}  // namespace granary::testing
