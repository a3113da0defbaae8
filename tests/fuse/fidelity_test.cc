// The mount is the source's tree, as the tools users copy and check datasets
// with see it: a tree of every awkward case (a name that is not UTF-8, a
// 255-byte name, times before 1970 and in 2262 with fractions, symlinks in
// and out of the tree, absolute and relative, hard links, files of several
// owners, user.* attributes, a FIFO) is compared with its mount by
// `rsync -aHAX --checksum --dry-run`, `tar --sort=name -c` and
// `find -printf`. What differs is exactly what the README says the mount
// drops or rewrites, and `granary dataset show` lists what was dropped. A
// dataset whose manifest cannot be loaded keeps no other dataset from being
// mounted, and `granary status` names it.
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "grpcpp/client_context.h"
#include "rocksdb/db.h"
#include "tests/fuse/mounted_tree.h"

namespace granary::testing {
namespace {

const std::string kLatin1Name = "caf\xe9.jpg";
const std::string kLongName(255, 'n');
// 2262-01-01 00:00:00.5 UTC, near the end of what int64 nanoseconds hold.
constexpr struct timespec kIn2262 = {9'214'646'400, 500'000'000};
// 1969-12-31 23:59:58.25 UTC.
constexpr struct timespec kBefore1970 = {-2, 250'000'000};

// What the mount leaves out or changes, as the README lists it: symlinks that
// leave the tree and FIFOs are dropped; an absolute symlink into the tree is
// made relative.
const std::vector<std::string> kDropped = {"a/abs_out", "a/fifo", "a/rel_out"};
const std::vector<std::string> kRewritten = {"a/abs_in"};

void SetTimes(const std::string& path, struct timespec mtime) {
  const struct timespec times[2] = {mtime, mtime};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, AT_SYMLINK_NOFOLLOW), 0) << path;
}

void SetXattr(const std::string& path, const std::string& name, const std::string& value) {
  ASSERT_EQ(::setxattr(path.c_str(), name.c_str(), value.data(), value.size(), 0), 0) << path;
}

void Own(const std::string& path, const char* owner, mode_t mode) {
  ASSERT_EQ(Shell(absl::StrCat("chown ", owner, " '", path, "'")).first, 0) << path;
  ASSERT_EQ(::chmod(path.c_str(), mode), 0) << path;
}

// The output of `command` run in `dir`, as sorted lines.
std::vector<std::string> SortedLines(const std::string& dir, const std::string& command) {
  auto [code, output] = Shell(absl::StrCat("cd '", dir, "' && ", command));
  EXPECT_EQ(code, 0) << command << ": " << output;
  std::vector<std::string> lines = absl::StrSplit(output, '\n', absl::SkipEmpty());
  std::sort(lines.begin(), lines.end());
  return lines;
}

class FidelityTest : public MountedTree {
 protected:
  void BuildTree() override {
    WriteFile(source_ + "/good.txt", "hello");
    WriteFile(source_ + "/" + kLatin1Name, RandomBytes(3000, 1));
    WriteFile(source_ + "/" + kLongName, "long");
    WriteFile(source_ + "/old.txt", "old");
    WriteFile(source_ + "/future.txt", "future");
    WriteFile(source_ + "/a/b/target", RandomBytes(70000, 2));
    WriteFile(source_ + "/h1", RandomBytes(5000, 3));
    WriteFile(source_ + "/owned", "nobody's");
    WriteFile(source_ + "/shared/daemon.txt", "daemon's");
    ASSERT_EQ(::link((source_ + "/h1").c_str(), (source_ + "/a/h2").c_str()), 0);
    ASSERT_EQ(::symlink("../a/b/target", (source_ + "/a/rel_in").c_str()), 0);
    ASSERT_EQ(::symlink("../../outside", (source_ + "/a/rel_out").c_str()), 0);
    ASSERT_EQ(::symlink((source_ + "/a/b/target").c_str(), (source_ + "/a/abs_in").c_str()), 0);
    ASSERT_EQ(::symlink("/etc/passwd", (source_ + "/a/abs_out").c_str()), 0);
    ASSERT_EQ(::mkfifo((source_ + "/a/fifo").c_str(), 0644), 0);
    Own(source_ + "/owned", "nobody:nogroup", 0600);
    Own(source_ + "/shared", "daemon:daemon", 0750);
    Own(source_ + "/shared/daemon.txt", "daemon:daemon", 0640);
    SetXattr(source_ + "/good.txt", "user.origin", "camera 1");
    SetXattr(source_ + "/h1", "user.binary", std::string("\0\xff\x01", 3));
    SetXattr(source_ + "/a", "user.empty", "");
    SetTimes(source_ + "/old.txt", kBefore1970);
    SetTimes(source_ + "/future.txt", kIn2262);
    SetTimes(source_ + "/a/rel_in", kBefore1970);
    // Directories last: adding entries changes their times.
    SetTimes(source_ + "/a/b", kBefore1970);
  }

  // Shared with every user, so that owners and modes decide who reads.
  std::vector<std::string> MountArgs() const override {
    std::vector<std::string> args = MountedTree::MountArgs();
    args.insert(args.end(), {"-o", "allow_other"});
    return args;
  }

  // Options that leave out of a tar or find what the mount drops or rewrites.
  static std::string TarExcludes() {
    std::string out;
    for (const auto* list : {&kDropped, &kRewritten}) {
      for (const std::string& path : *list) absl::StrAppend(&out, " --exclude='./", path, "'");
    }
    return out;
  }
};

TEST_F(FidelityTest, RsyncFindsNothingButWhatTheReadmeSaysIsDroppedOrRewritten) {
  auto [code, output] =
      Shell(absl::StrCat("rsync -aHAX --checksum --dry-run --itemize-changes "
                         "--delete '",
                         source_, "/' '", mounted_, "/'"));
  ASSERT_EQ(code, 0) << output;
  std::set<std::string> changed;
  for (absl::string_view line : absl::StrSplit(output, '\n', absl::SkipEmpty())) {
    // "cL+++++++++ a/abs_out -> /etc/passwd": flags, a space, the path.
    std::string path(line.substr(line.find(' ') + 1));
    changed.insert(path.substr(0, path.find(" -> ")));
  }
  std::set<std::string> expected(kDropped.begin(), kDropped.end());
  expected.insert(kRewritten.begin(), kRewritten.end());
  EXPECT_EQ(changed, expected) << output;
}

TEST_F(FidelityTest, TarOfTheMountIsTheTarOfTheSourceByteForByte) {
  const std::string tar =
      "tar --sort=name --numeric-owner" + TarExcludes() + " -cf - . | sha256sum";
  std::vector<std::string> from_source = SortedLines(source_, tar);
  std::vector<std::string> from_mount = SortedLines(mounted_, tar);
  ASSERT_EQ(from_source.size(), 1u);
  EXPECT_EQ(from_source, from_mount);
  // And the archive has every case in it (names, links, owners).
  std::vector<std::string> listed =
      SortedLines(mounted_, "tar --sort=name" + TarExcludes() + " -cf - . | tar -tvf -");
  std::string listing = absl::StrJoin(listed, "\n");
  EXPECT_NE(listing.find("caf\\351.jpg"), std::string::npos) << listing;
  EXPECT_NE(listing.find("link to ./a/h2"), std::string::npos) << listing;
  EXPECT_NE(listing.find("nobody/nogroup"), std::string::npos) << listing;
  EXPECT_NE(listing.find("2262-01-01"), std::string::npos) << listing;
  EXPECT_NE(listing.find("1969-12-31 23:59"), std::string::npos) << listing;
}

TEST_F(FidelityTest, FindPrintsTheSameOwnersModesLinksSizesAndTimes) {
  std::string find = "find . -printf '%p %U %G %m %n %s %T@ %C@ %y %l\\n'";
  for (const auto* list : {&kDropped, &kRewritten}) {
    for (const std::string& path : *list) find += " | grep -av '^./" + path + " '";
  }
  EXPECT_EQ(SortedLines(source_, find), SortedLines(mounted_, find));
}

// du and ls -s count what the source allocated: a 5-byte file takes a whole
// block there, a short symlink none.
TEST_F(FidelityTest, DuCountsTheBlocksTheSourceAllocated) {
  std::string blocks = "find . -printf '%p %b\\n'";
  for (const auto* list : {&kDropped, &kRewritten}) {
    for (const std::string& path : *list) blocks += " | grep -av '^./" + path + " '";
  }
  EXPECT_EQ(SortedLines(source_, blocks), SortedLines(mounted_, blocks));
  const std::string du =
      "du -s --exclude=abs_out --exclude=fifo --exclude=rel_out --exclude=abs_in . | cut -f1";
  EXPECT_EQ(SortedLines(source_, du), SortedLines(mounted_, du));
}

// Whether the user `uid` (in group `gid` alone) reads `path` whole and finds
// `want` there; in a child process that drops root.
bool ReadsAs(uid_t uid, gid_t gid, const std::string& path, const std::string& want) {
  pid_t child = fork();
  if (child == 0) {
    if (setgroups(0, nullptr) != 0 || setgid(gid) != 0 || setuid(uid) != 0) _exit(2);
    _exit(ReadWhole(path) == want ? 0 : 1);
  }
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// The source's owners decide through the mount as they do in the source:
// nobody reads its own 0600 file, which daemon may not; daemon reads its
// 0640 file in its 0750 directory, which nobody may not.
TEST_F(FidelityTest, TheSourcesOwnersAndModesDecideWhoReads) {
  if (geteuid() != 0) GTEST_SKIP() << "switching users needs root";
  for (std::filesystem::path dir = source_dir_.path(); dir != "/"; dir = dir.parent_path()) {
    ASSERT_EQ(::chmod(dir.c_str(), 0755), 0) << dir;
  }
  // The mount point's parents; the mount's root is granary-fuse's own.
  for (std::filesystem::path dir = std::filesystem::path(mount_->path()).parent_path(); dir != "/";
       dir = dir.parent_path()) {
    ASSERT_EQ(::chmod(dir.c_str(), 0755), 0) << dir;
  }
  struct User {
    uid_t uid;
    gid_t gid;
  };
  auto user = [](const char* name) {
    struct passwd* entry = ::getpwnam(name);  // A static buffer: copied out.
    return entry == nullptr ? User{0, 0} : User{entry->pw_uid, entry->pw_gid};
  };
  const User nobody = user("nobody");
  const User daemon = user("daemon");
  ASSERT_NE(nobody.uid, 0u);
  ASSERT_NE(daemon.uid, 0u);
  for (const std::string& root : {source_, mounted_}) {
    EXPECT_TRUE(ReadsAs(nobody.uid, nobody.gid, root + "/owned", "nobody's")) << root;
    EXPECT_FALSE(ReadsAs(daemon.uid, daemon.gid, root + "/owned", "nobody's")) << root;
    EXPECT_TRUE(ReadsAs(daemon.uid, daemon.gid, root + "/shared/daemon.txt", "daemon's")) << root;
    EXPECT_FALSE(ReadsAs(nobody.uid, nobody.gid, root + "/shared/daemon.txt", "daemon's")) << root;
  }
}

TEST_F(FidelityTest, HardLinksAreOneInodeAndAttributesReadBack) {
  struct stat first, second;
  ASSERT_EQ(::stat((mounted_ + "/h1").c_str(), &first), 0);
  ASSERT_EQ(::stat((mounted_ + "/a/h2").c_str(), &second), 0);
  EXPECT_EQ(first.st_ino, second.st_ino);
  EXPECT_EQ(first.st_nlink, 2u);
  EXPECT_EQ(ReadWhole(mounted_ + "/a/h2"), RandomBytes(5000, 3));
  EXPECT_EQ(ReadWhole(mounted_ + "/" + kLatin1Name), RandomBytes(3000, 1));
  EXPECT_EQ(ReadWhole(mounted_ + "/a/abs_in"), RandomBytes(70000, 2));

  char value[16];
  ssize_t n = ::getxattr((mounted_ + "/h1").c_str(), "user.binary", value, sizeof(value));
  ASSERT_EQ(n, 3);
  EXPECT_EQ(std::string(value, 3), std::string("\0\xff\x01", 3));
  EXPECT_EQ(::getxattr((mounted_ + "/h1").c_str(), "user.binary", value, 1), -1);
  EXPECT_EQ(errno, ERANGE);
  // No attribute is a clean "none", never "not supported".
  EXPECT_EQ(::getxattr((mounted_ + "/old.txt").c_str(), "user.x", value, sizeof(value)), -1);
  EXPECT_EQ(errno, ENODATA);
  EXPECT_EQ(::listxattr((mounted_ + "/old.txt").c_str(), value, sizeof(value)), 0);
  EXPECT_EQ(::listxattr(mount_->path().c_str(), value, sizeof(value)), 0);
}

// A dataset holds no security.* or trusted.* attributes: the mount says it
// does not support them, as a filesystem without handlers for them does, so
// that `ls -l` asks for a label once per listing rather than once per entry.
TEST_F(FidelityTest, TheSystemsAttributeNamespacesAreNotSupported) {
  char value[64];
  for (const std::string& path : {mounted_ + "/good.txt", mounted_ + "/a", mount_->path()}) {
    for (const char* name : {"security.selinux", "security.capability", "trusted.x"}) {
      errno = 0;
      EXPECT_EQ(::lgetxattr(path.c_str(), name, value, sizeof(value)), -1) << path << " " << name;
      EXPECT_EQ(errno, EOPNOTSUPP) << path << " " << name;
    }
  }
  ssize_t n = ::getxattr((mounted_ + "/good.txt").c_str(), "user.origin", value, sizeof(value));
  ASSERT_EQ(n, 8);
  EXPECT_EQ(std::string(value, 8), "camera 1");
  // The kernel's own ACL xattrs are still answered: none here.
  EXPECT_EQ(
      ::getxattr((mounted_ + "/good.txt").c_str(), "system.posix_acl_access", value, sizeof(value)),
      -1);
  EXPECT_EQ(errno, ENODATA);
}

// One copy in the cache: a hard link is read as the file it names.
TEST_F(FidelityTest, AHardLinkIsCachedOnce) {
  absl::StatusOr<v1::DatasetInfo> described = GetDataset(*server_, "ds");
  ASSERT_TRUE(described.ok()) << described.status();
  const v1::DatasetInfo& info = *described;
  uint64_t source_bytes = 0;
  for (const std::string& path : SortedLines(source_, "find . -type f -links 1 -printf '%s\\n'")) {
    source_bytes += std::stoull(path);
  }
  EXPECT_EQ(info.total_bytes(), source_bytes + 5000);  // h1 and a/h2 count once.
  EXPECT_EQ(ReadWhole(mounted_ + "/h1"), ReadWhole(mounted_ + "/a/h2"));
}

TEST_F(FidelityTest, DatasetShowListsWhatWasDroppedAndWhy) {
  absl::StatusOr<v1::DatasetInfo> described = GetDataset(*server_, "ds");
  ASSERT_TRUE(described.ok()) << described.status();
  const v1::DatasetInfo& info = *described;
  ASSERT_EQ(info.skipped_count(), kDropped.size());
  std::vector<std::string> reasons;
  for (size_t i = 0; i < kDropped.size(); ++i) {
    EXPECT_EQ(info.skipped(static_cast<int>(i)).path(), kDropped[i]);
    reasons.push_back(info.skipped(static_cast<int>(i)).reason());
  }
  EXPECT_NE(reasons[0].find("/etc/passwd leaves the source"), std::string::npos) << reasons[0];
  EXPECT_NE(reasons[1].find("FIFO"), std::string::npos) << reasons[1];
  EXPECT_NE(reasons[2].find("../../outside leaves the source"), std::string::npos) << reasons[2];
}

TEST_F(FidelityTest, StatfsReportsTheSizesOfAReadOnlyTreeAndNoInodeLimit) {
  struct statvfs st;
  ASSERT_EQ(::statvfs(mounted_.c_str(), &st), 0);
  EXPECT_TRUE(st.f_flag & ST_RDONLY);
  EXPECT_GT(st.f_blocks, 0u);
  EXPECT_EQ(st.f_bfree, 0u);
  EXPECT_EQ(st.f_bavail, 0u);
  EXPECT_EQ(st.f_files, 0u);
  EXPECT_EQ(st.f_ffree, 0u);
  struct stat source_dir, mounted_dir;
  ASSERT_EQ(::stat((source_ + "/a").c_str(), &source_dir), 0);
  ASSERT_EQ(::stat((mounted_ + "/a").c_str(), &mounted_dir), 0);
  EXPECT_EQ(mounted_dir.st_size, source_dir.st_size);
  EXPECT_GT(mounted_dir.st_size, 0);
}

// A catalog whose manifest pages of one dataset are lost (a damaged disk):
// granaryd starts and serves, the mount shows the other dataset, and status
// names the one it cannot load.
TEST(BrokenDataset, TheMountServesEveryOtherDatasetAndStatusNamesIt) {
  TempDir sources;
  WriteFile(sources.path() + "/good/file", "good bytes");
  WriteFile(sources.path() + "/broken/file", "lost");
  auto started = GranarydProcess::Start();
  ASSERT_TRUE(started.ok()) << started.status();
  std::unique_ptr<GranarydProcess> server = *std::move(started);
  ASSERT_TRUE(AddDataset(*server, "good", sources.path() + "/good").ok());
  ASSERT_TRUE(AddDataset(*server, "broken", sources.path() + "/broken").ok());
  absl::StatusOr<v1::DatasetInfo> broken = GetDataset(*server, "broken");
  ASSERT_TRUE(broken.ok()) << broken.status();
  const uint64_t broken_version = broken->version();
  ASSERT_TRUE(server->Terminate().ok());
  {
    // Manifest pages are keyed "m" + the version, big-endian.
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open({}, server->data_dir() + "/catalog", &raw).ok());
    std::unique_ptr<rocksdb::DB> db(raw);
    std::string prefix = "m";
    for (int i = 7; i >= 0; --i) prefix.push_back(static_cast<char>(broken_version >> (8 * i)));
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator({}));
    int deleted = 0;
    for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
      ASSERT_TRUE(db->Delete({}, it->key()).ok());
      ++deleted;
    }
    ASSERT_GT(deleted, 0);
  }
  ASSERT_TRUE(server->Restart().ok());

  auto mount = FuseMount::Start(server->socket_address(), {}, "good");
  ASSERT_TRUE(mount.ok()) << mount.status();
  EXPECT_EQ(ReadWhole((*mount)->path() + "/good/file"), "good bytes");
  struct stat st;
  EXPECT_NE(::stat(((*mount)->path() + "/broken").c_str(), &st), 0);
  EXPECT_NE((*mount)->log().find("cannot mount dataset 'broken'"), std::string::npos)
      << (*mount)->log();

  auto stub = server->SocketStub();
  grpc::ClientContext context;
  v1::StatusRequest request;
  request.set_local_only(true);
  v1::StatusResponse status;
  ASSERT_TRUE(stub->Status(&context, request, &status).ok());
  ASSERT_EQ(status.nodes(0).unloadable_datasets_size(), 1);
  EXPECT_EQ(status.nodes(0).unloadable_datasets(0).name(), "broken");
  EXPECT_EQ(status.nodes(0).unloadable_datasets(0).version(), broken_version);
  EXPECT_NE(status.nodes(0).unloadable_datasets(0).error().find("damaged"), std::string::npos)
      << status.nodes(0).unloadable_datasets(0).error();
}

// A mount of several datasets loads a manifest only when the dataset is
// first looked into, and with a budget smaller than two of them, drops the
// one read least recently and loads it again when it is read again; every
// byte is right throughout.
TEST(ManifestBudget, AMountLoadsWhatIsReadAndRereadsDroppedDatasetsWithinItsBudget) {
  constexpr int kDatasets = 3;
  constexpr int kFiles = 6000;  // Over 600 kB of manifest and tables each.
  TempDir sources;
  auto started = GranarydProcess::Start();
  ASSERT_TRUE(started.ok()) << started.status();
  std::unique_ptr<GranarydProcess> server = *std::move(started);
  for (int d = 0; d < kDatasets; ++d) {
    const std::string source = absl::StrCat(sources.path(), "/d", d);
    for (int i = 0; i < kFiles; ++i) {
      WriteFile(absl::StrCat(source, "/file-", i), absl::StrCat("dataset ", d, " file ", i));
    }
    ASSERT_TRUE(AddDataset(*server, absl::StrCat("d", d), source).ok());
  }
  auto count = [](const std::string& log, const std::string& what) {
    int n = 0;
    for (size_t at = log.find(what); at != std::string::npos; at = log.find(what, at + 1)) ++n;
    return n;
  };
  auto mount = FuseMount::Start(server->socket_address(), {"--manifest-memory", "1MiB"}, "d0");
  ASSERT_TRUE(mount.ok()) << mount.status();
  std::vector<std::string> listed;
  for (const auto& entry : std::filesystem::directory_iterator((*mount)->path())) {
    listed.push_back(entry.path().filename());
  }
  std::sort(listed.begin(), listed.end());
  EXPECT_EQ(listed, (std::vector<std::string>{"d0", "d1", "d2"}));
  EXPECT_EQ(count((*mount)->log(), "loaded dataset 'd2'"), 0) << "listing the root loads nothing\n"
                                                              << (*mount)->log();

  for (int round = 0; round < 2; ++round) {
    for (int d = 0; d < kDatasets; ++d) {
      const int file = round * 100 + d;
      EXPECT_EQ(ReadWhole(absl::StrCat((*mount)->path(), "/d", d, "/file-", file)),
                absl::StrCat("dataset ", d, " file ", file));
    }
  }
  const std::string log = (*mount)->log();
  for (int d = 0; d < kDatasets; ++d) {
    EXPECT_EQ(count(log, absl::StrCat("loaded dataset 'd", d, "'")), 2)
        << "each dropped for the next and loaded again\n"
        << log;
  }
}

}  // namespace
}  // namespace granary::testing
