#include "source/posix_scanner.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <limits>
#include <span>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/base/absl_compat.h"
#include "common/base/logging.h"
#include "common/base/mutex.h"
#include "common/base/printable.h"
#include "common/base/status.h"
#include "common/dataset/posix_acl.h"
#include "common/source_access/source_path.h"

namespace granary {
namespace {

// Clamped to what int64 nanoseconds hold (1677-2262).
int64_t Nanoseconds(const struct timespec& time) {
  int64_t ns;
  if (__builtin_mul_overflow(static_cast<int64_t>(time.tv_sec), int64_t{1'000'000'000}, &ns) ||
      __builtin_add_overflow(ns, int64_t{time.tv_nsec}, &ns)) {
    return time.tv_sec < 0 ? std::numeric_limits<int64_t>::min()
                           : std::numeric_limits<int64_t>::max();
  }
  return ns;
}

// What the manifest keeps of every entry's stat: mode, owner, link count,
// mtime and identity; a file's and a directory's size and allocation too, as
// ls and du show them. False if
// the stat's device is none the manifest can hold (UnknownDevice says so).
bool RecordStat(const struct stat& st, ManifestEntry* entry) {
  if (!entry->set_device(st.st_dev)) return false;
  entry->mode = st.st_mode;
  entry->mtime_ns = Nanoseconds(st.st_mtim);
  entry->uid = st.st_uid;
  entry->gid = st.st_gid;
  entry->inode = st.st_ino;
  entry->ctime_ns = Nanoseconds(st.st_ctim);
  entry->nlink = static_cast<uint32_t>(std::min<nlink_t>(st.st_nlink, UINT32_MAX));
  if (S_ISDIR(st.st_mode) || S_ISREG(st.st_mode)) {
    entry->size = static_cast<uint64_t>(st.st_size);
    entry->set_blocks(static_cast<uint64_t>(st.st_blocks));
  }
  return true;
}

absl::Status UnknownDevice(std::string_view path, const struct stat& st) {
  return absl::InternalError(absl::StrCat("stat of ", AsAbsl(path), " gave device ", st.st_dev,
                                          ", which is no Linux device number"));
}

constexpr absl::string_view kUserNamespace = "user.";

// The user.* extended attributes and the ACLs (common/dataset/posix_acl.h) of `name`
// in the directory `dir_fd`, sorted by name, read through /proc/self/fd so
// that the directory is the one held open and `name` itself is not followed.
// Other namespaces are not kept: trusted.* and security.* are the system's. An
// ACL that cannot be read is kept empty, which fails closed. A filesystem
// without xattrs has none.
absl::StatusOr<std::vector<ExtendedAttribute>> KeptXattrs(int dir_fd, const char* name,
                                                          const std::string& full) {
  const std::string path = absl::StrCat("/proc/self/fd/", dir_fd, "/", name);
  std::string names;
  for (ssize_t size = 256;;) {
    names.resize(static_cast<size_t>(size));
    ssize_t n = ::llistxattr(path.c_str(), names.data(), names.size());
    if (n >= 0) {
      names.resize(static_cast<size_t>(n));
      break;
    }
    if (errno == ENOTSUP || errno == ENOENT) return std::vector<ExtendedAttribute>();
    if (errno != ERANGE) return ErrnoStatus(errno, absl::StrCat("cannot list xattrs of ", full));
    size = ::llistxattr(path.c_str(), nullptr, 0);
    if (size < 0) return ErrnoStatus(errno, absl::StrCat("cannot list xattrs of ", full));
  }
  std::vector<ExtendedAttribute> xattrs;
  for (absl::string_view listed : absl::StrSplit(names, '\0', absl::SkipEmpty())) {
    const bool acl = IsAclXattr(AsStd(listed));
    if (!acl && !absl::StartsWith(listed, kUserNamespace)) continue;
    ExtendedAttribute xattr{std::string(listed), {}};
    bool present = true;
    for (ssize_t size = 256;;) {
      xattr.value.resize(static_cast<size_t>(size));
      ssize_t n =
          ::lgetxattr(path.c_str(), xattr.name.c_str(), xattr.value.data(), xattr.value.size());
      if (n >= 0) {
        xattr.value.resize(static_cast<size_t>(n));
        break;
      }
      if (errno == ERANGE) size = ::lgetxattr(path.c_str(), xattr.name.c_str(), nullptr, 0);
      if (errno == ENODATA) {  // Removed since it was listed.
        present = false;
        break;
      }
      if (acl && (errno != ERANGE || size < 0)) {
        xattr.value.clear();
        break;
      }
      if (errno != ERANGE || size < 0) {
        return ErrnoStatus(errno, absl::StrCat("cannot read xattr ", xattr.name, " of ", full));
      }
    }
    if (present) xattrs.push_back(std::move(xattr));
  }
  std::sort(xattrs.begin(), xattrs.end(),
            [](const ExtendedAttribute& a, const ExtendedAttribute& b) { return a.name < b.name; });
  return xattrs;
}

const char* KindOf(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "of an unknown type";
}

// Appends the components of `path` to `parts`, resolving "." and ".."
// lexically; false if ".." climbs above the start. With `at_root`, ".." at
// the start stays there, as "/.." is "/".
bool WalkComponents(std::string_view path, bool at_root, std::vector<std::string_view>* parts) {
  for (absl::string_view part : absl::StrSplit(AsAbsl(path), '/', absl::SkipEmpty())) {
    if (part == ".") continue;
    if (part == "..") {
      if (parts->empty()) {
        if (at_root) continue;
        return false;
      }
      parts->pop_back();
    } else {
      parts->emplace_back(part.data(), part.size());
    }
  }
  return true;
}

std::string JoinPath(const std::string& dir, const char* name) {
  return dir.empty() ? std::string(name) : absl::StrCat(dir, "/", name);
}

// The shared state of one scan: a queue of directories still to list, and the
// first error, which stops every worker.
class Scan {
 public:
  Scan(const std::string& root, int root_fd, std::vector<std::string> absolute_roots,
       size_t max_entries)
      : root_(root),
        root_fd_(root_fd),
        absolute_roots_(std::move(absolute_roots)),
        max_entries_(max_entries) {}

  void Run(int threads) {
    {
      MutexLock lock(&mu_);
      queue_.push_back("");
    }
    std::vector<std::thread> workers;
    for (int i = 0; i < threads; ++i) workers.emplace_back([this] { Work(); });
    for (std::thread& worker : workers) worker.join();
  }

  absl::StatusOr<ScannedTree> Result() && {
    MutexLock lock(&mu_);
    if (!error_.ok()) return error_;
    ScannedTree tree;
    tree.skipped = std::move(skipped_);
    // One block at a time is moved and freed: the entries are held once,
    // and one block twice.
    tree.entries.reserve(entry_count_ + 1);  // And the root's, added after.
    for (ManifestEntries& block : blocks_) {
      std::move(block.begin(), block.end(), std::back_inserter(tree.entries));
      ManifestEntries().swap(block);
    }
    return tree;
  }

 private:
  void Work() {
    std::vector<ManifestEntry> found;
    std::vector<std::string> subdirs;
    std::vector<SkippedEntry> skipped;
    while (true) {
      std::string dir;
      {
        MutexLock lock(&mu_);
        while (queue_.empty() && busy_ != 0 && error_.ok()) cv_.Wait(&mu_);
        if (queue_.empty() || !error_.ok()) break;
        dir = std::move(queue_.front());
        queue_.pop_front();
        ++busy_;
      }
      found.clear();
      subdirs.clear();
      skipped.clear();
      absl::Status listed = ListDirectory(dir, &found, &subdirs, &skipped);
      MutexLock lock(&mu_);
      --busy_;
      if (!listed.ok() && error_.ok()) error_ = listed;
      for (std::string& subdir : subdirs) queue_.push_back(std::move(subdir));
      for (ManifestEntry& entry : found) {
        if (blocks_.empty() || blocks_.back().size() == kBlockEntries) {
          blocks_.emplace_back().reserve(kBlockEntries);
        }
        blocks_.back().push_back(std::move(entry));
      }
      entry_count_ += found.size();
      for (SkippedEntry& entry : skipped) {
        skipped_.Add(std::move(entry.path), std::move(entry.reason));
      }
      // Checked as entries arrive, so a tree far over the limit stops the
      // scan early instead of first filling memory with it. The root's own
      // entry is added after the scan: one more than these.
      if (entry_count_ >= max_entries_ && error_.ok()) {
        error_ = absl::ResourceExhaustedError(absl::StrCat(
            "source ", root_, " has more than ", max_entries_,
            " files, directories and links, the most one dataset may have (max_dataset_entries); "
            "register a subdirectory or raise the limit"));
      }
      cv_.SignalAll();
    }
    cv_.SignalAll();
  }

  // Appends the entries of `dir` (relative to the root) to `found`, its
  // subdirectories to `subdirs` and what it leaves out to `skipped`.
  absl::Status ListDirectory(const std::string& dir, std::vector<ManifestEntry>* found,
                             std::vector<std::string>* subdirs,
                             std::vector<SkippedEntry>* skipped) {
    std::string full = dir.empty() ? root_ : absl::StrCat(root_, "/", dir);
    int fd;
    if (dir.empty()) {
      fd = ::dup(root_fd_);
      if (fd < 0) return ErrnoStatus(errno, absl::StrCat("cannot read source directory ", full));
    } else {
      // Beneath the root, through no symlink: a directory swapped for a
      // symlink since it was listed must not bring another tree in.
      absl::StatusOr<UniqueFd> opened = OpenBeneath(root_fd_, dir, O_RDONLY | O_DIRECTORY);
      if (!opened.ok()) {
        // Removed, or no longer a directory, while the scan runs: it is
        // simply not there.
        if (absl::IsNotFound(opened.status()) || absl::IsFailedPrecondition(opened.status())) {
          GRANARY_LOG(INFO) << "skipping " << full << ": " << opened.status().message();
          return absl::OkStatus();
        }
        return absl::Status(
            opened.status().code(),
            absl::StrCat("cannot read source directory ", full, ": ", opened.status().message()));
      }
      fd = opened->Release();
    }
    DIR* stream = ::fdopendir(fd);
    if (stream == nullptr) {
      int error = errno;
      ::close(fd);
      return ErrnoStatus(error, absl::StrCat("cannot read source directory ", full));
    }
    absl::Status status;
    while (true) {
      errno = 0;
      struct dirent* item = ::readdir(stream);
      if (item == nullptr) {
        if (errno != 0) status = ErrnoStatus(errno, absl::StrCat("cannot list ", full));
        break;
      }
      if (std::strcmp(item->d_name, ".") == 0 || std::strcmp(item->d_name, "..") == 0) continue;
      struct stat st;
      if (::fstatat(::dirfd(stream), item->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno == ENOENT) continue;
        status = ErrnoStatus(errno, absl::StrCat("cannot stat ", full, "/", item->d_name));
        break;
      }
      ManifestEntry entry;
      entry.path = JoinPath(dir, item->d_name);
      if (!RecordStat(st, &entry)) {
        status = UnknownDevice(absl::StrCat(full, "/", item->d_name), st);
        break;
      }
      if (S_ISREG(st.st_mode)) {
        entry.type = EntryType::kFile;
      } else if (S_ISDIR(st.st_mode)) {
        entry.type = EntryType::kDirectory;
        subdirs->push_back(entry.path);
      } else if (S_ISLNK(st.st_mode)) {
        std::string target(static_cast<size_t>(st.st_size) + 1, '\0');
        ssize_t n = ::readlinkat(::dirfd(stream), item->d_name, target.data(), target.size());
        if (n < 0) {
          status =
              ErrnoStatus(errno, absl::StrCat("cannot read symlink ", full, "/", item->d_name));
          break;
        }
        target.resize(static_cast<size_t>(n));
        std::optional<std::string> kept = InTreeSymlinkTarget(entry.path, target, absolute_roots_);
        if (!kept) {
          skipped->push_back({std::move(entry.path), absl::StrCat("symlink to ", Printable(target),
                                                                  " leaves the source")});
          continue;
        }
        entry.type = EntryType::kSymlink;
        entry.size = kept->size();
        entry.set_blocks(static_cast<uint64_t>(st.st_blocks));
        entry.set_symlink_target(*std::move(kept));
      } else {
        skipped->push_back(
            {std::move(entry.path),
             absl::StrCat(KindOf(st.st_mode), ", not a file, directory or symlink")});
        continue;
      }
      absl::StatusOr<std::vector<ExtendedAttribute>> xattrs =
          KeptXattrs(::dirfd(stream), item->d_name, absl::StrCat(full, "/", item->d_name));
      if (!xattrs.ok()) {
        status = xattrs.status();
        break;
      }
      entry.set_xattrs(*std::move(xattrs));
      found->push_back(std::move(entry));
    }
    ::closedir(stream);
    return status;
  }

  const std::string& root_;
  const int root_fd_;
  const std::vector<std::string> absolute_roots_;
  const size_t max_entries_;
  Mutex mu_;
  CondVar cv_;
  std::deque<std::string> queue_ ABSL_GUARDED_BY(mu_);
  int busy_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  // Entries as found, in blocks rather than one growing array: an array that
  // doubles holds its entries twice while it moves them, and a registration
  // of ten million entries then peaked at twice its manifest.
  static constexpr size_t kBlockEntries = 1 << 16;
  std::vector<ManifestEntries> blocks_ ABSL_GUARDED_BY(mu_);
  size_t entry_count_ ABSL_GUARDED_BY(mu_) = 0;
  SkippedEntries skipped_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

std::optional<std::string> InTreeSymlinkTarget(std::string_view link_path, std::string_view target,
                                               const std::vector<std::string>& absolute_roots) {
  if (target.empty()) return std::nullopt;
  std::vector<std::string_view> link_dir;
  WalkComponents(link_path, false, &link_dir);
  if (!link_dir.empty()) link_dir.pop_back();  // The link's own name.
  if (target.front() != '/') {
    std::vector<std::string_view> resolved = link_dir;
    if (!WalkComponents(target, false, &resolved)) return std::nullopt;
    return std::string(target);
  }
  std::vector<std::string_view> resolved;
  WalkComponents(target, true, &resolved);
  for (const std::string& root : absolute_roots) {
    std::vector<std::string_view> root_parts;
    WalkComponents(root, true, &root_parts);
    if (resolved.size() < root_parts.size() ||
        !std::equal(root_parts.begin(), root_parts.end(), resolved.begin())) {
      continue;
    }
    // From the link's directory up to the deepest directory it shares with
    // the target, then down to the target.
    std::span<const std::string_view> inside(resolved.begin() + root_parts.size(), resolved.end());
    size_t shared = 0;
    while (shared < link_dir.size() && shared < inside.size() &&
           link_dir[shared] == inside[shared]) {
      ++shared;
    }
    std::string relative;
    for (size_t i = shared; i < link_dir.size(); ++i) relative.append("../");
    for (size_t i = shared; i < inside.size(); ++i) {
      absl::StrAppend(&relative, AsAbsl(inside[i]), i + 1 < inside.size() ? "/" : "");
    }
    if (relative.empty()) return ".";
    if (relative.back() == '/') relative.pop_back();
    return relative;
  }
  return std::nullopt;
}

absl::StatusOr<ScannedTree> ScanPosixTree(const std::string& root, int threads,
                                          size_t max_entries) {
  // The root itself may be reached through symlinks (an administrator chose
  // it); nothing beneath it is.
  UniqueFd root_fd(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!root_fd.valid()) {
    int error = errno;
    struct stat st;
    if (error == ENOTDIR && ::stat(root.c_str(), &st) == 0) {
      return absl::InvalidArgumentError(absl::StrCat("source ", root, " is not a directory"));
    }
    if (error == ENOENT || error == ENOTDIR) {
      return absl::NotFoundError(absl::StrCat("source directory ", root, " does not exist"));
    }
    return ErrnoStatus(error, absl::StrCat("cannot read source directory ", root));
  }
  struct stat st;
  if (::fstat(root_fd.get(), &st) != 0) {
    return ErrnoStatus(errno, absl::StrCat("cannot stat source directory ", root));
  }
  // Absolute symlinks may name the root as it was given or as it resolves.
  std::vector<std::string> absolute_roots = {root};
  if (char* resolved = ::realpath(root.c_str(), nullptr); resolved != nullptr) {
    if (root != resolved) absolute_roots.emplace_back(resolved);
    std::free(resolved);
  }
  Scan scan(root, root_fd.get(), std::move(absolute_roots), max_entries);
  scan.Run(std::max(1, threads));
  GRANARY_ASSIGN_OR_RETURN(ScannedTree tree, std::move(scan).Result());
  std::sort(tree.skipped.listed.begin(), tree.skipped.listed.end(),
            [](const SkippedEntry& a, const SkippedEntry& b) { return a.path < b.path; });
  ManifestEntry root_entry;
  root_entry.type = EntryType::kDirectory;
  if (!RecordStat(st, &root_entry)) return UnknownDevice(root, st);
  GRANARY_ASSIGN_OR_RETURN(std::vector<ExtendedAttribute> root_xattrs,
                           KeptXattrs(root_fd.get(), ".", root));
  root_entry.set_xattrs(std::move(root_xattrs));
  tree.entries.push_back(std::move(root_entry));
  return tree;
}

}  // namespace granary
