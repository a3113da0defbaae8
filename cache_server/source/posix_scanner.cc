#include "cache_server/source/posix_scanner.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/logging.h"
#include "common/source_path.h"
#include "common/status.h"

namespace granary {
namespace {

int64_t Nanoseconds(const struct timespec& time) {
  return static_cast<int64_t>(time.tv_sec) * 1'000'000'000 + time.tv_nsec;
}

// What the manifest keeps of every entry's stat: mode, owner, mtime and identity.
void RecordStat(const struct stat& st, ManifestEntry* entry) {
  entry->mode = st.st_mode;
  entry->mtime_ns = Nanoseconds(st.st_mtim);
  entry->uid = st.st_uid;
  entry->gid = st.st_gid;
  entry->device = st.st_dev;
  entry->inode = st.st_ino;
  entry->ctime_ns = Nanoseconds(st.st_ctim);
}

std::string JoinPath(const std::string& dir, const char* name) {
  return dir.empty() ? std::string(name) : absl::StrCat(dir, "/", name);
}

// The shared state of one scan: a queue of directories still to list, and the
// first error, which stops every worker.
class Scan {
 public:
  Scan(const std::string& root, int root_fd, size_t max_entries)
      : root_(root), root_fd_(root_fd), max_entries_(max_entries) {}

  void Run(int threads) {
    queue_.push_back("");
    std::vector<std::thread> workers;
    for (int i = 0; i < threads; ++i) workers.emplace_back([this] { Work(); });
    for (std::thread& worker : workers) worker.join();
  }

  absl::StatusOr<ManifestEntries> Result() && {
    if (!error_.ok()) return error_;
    return std::move(entries_);
  }

 private:
  void Work() {
    std::vector<ManifestEntry> found;
    std::vector<std::string> subdirs;
    while (true) {
      std::string dir;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [this] { return !queue_.empty() || busy_ == 0 || !error_.ok(); });
        if (queue_.empty() || !error_.ok()) break;
        dir = std::move(queue_.front());
        queue_.pop_front();
        ++busy_;
      }
      found.clear();
      subdirs.clear();
      absl::Status listed = ListDirectory(dir, &found, &subdirs);
      std::lock_guard lock(mu_);
      --busy_;
      if (!listed.ok() && error_.ok()) error_ = listed;
      for (std::string& subdir : subdirs) queue_.push_back(std::move(subdir));
      std::move(found.begin(), found.end(), std::back_inserter(entries_));
      // Checked as entries arrive, so a tree far over the limit stops the
      // scan early instead of first filling memory with it. The root's own
      // entry is added after the scan: one more than these.
      if (entries_.size() >= max_entries_ && error_.ok()) {
        error_ = absl::ResourceExhaustedError(absl::StrCat(
            "source ", root_, " has more than ", max_entries_,
            " files, directories and links, the most one dataset may have (max_dataset_entries); "
            "register a subdirectory or raise the limit"));
      }
      cv_.notify_all();
    }
    cv_.notify_all();
  }

  // Appends the entries of `dir` (relative to the root) to `found`, and its
  // subdirectories to `subdirs`.
  absl::Status ListDirectory(const std::string& dir, std::vector<ManifestEntry>* found,
                             std::vector<std::string>* subdirs) {
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
      RecordStat(st, &entry);
      if (S_ISREG(st.st_mode)) {
        entry.type = EntryType::kFile;
        entry.size = static_cast<uint64_t>(st.st_size);
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
        if (!SymlinkStaysInside(entry.path, target)) {
          GRANARY_LOG(INFO) << "skipping symlink " << full << "/" << item->d_name << " -> "
                            << target << ": it leaves the source";
          continue;
        }
        entry.type = EntryType::kSymlink;
        entry.size = target.size();
        entry.symlink_target = std::move(target);
      } else {
        GRANARY_LOG(INFO) << "skipping " << full << "/" << item->d_name
                          << ": not a file, directory or symlink";
        continue;
      }
      found->push_back(std::move(entry));
    }
    ::closedir(stream);
    return status;
  }

  const std::string& root_;
  const int root_fd_;
  const size_t max_entries_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> queue_;
  int busy_ = 0;
  absl::Status error_;
  ManifestEntries entries_;
};

}  // namespace

bool SymlinkStaysInside(const std::string& link_path, const std::string& target) {
  if (target.empty() || target.front() == '/') return false;
  std::vector<std::string> parts = absl::StrSplit(link_path, '/', absl::SkipEmpty());
  if (!parts.empty()) parts.pop_back();  // The link's own name.
  for (absl::string_view part : absl::StrSplit(target, '/', absl::SkipEmpty())) {
    if (part == ".") continue;
    if (part == "..") {
      if (parts.empty()) return false;
      parts.pop_back();
    } else {
      parts.emplace_back(part);
    }
  }
  return true;
}

absl::StatusOr<ManifestEntries> ScanPosixTree(const std::string& root, int threads,
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
  Scan scan(root, root_fd.get(), max_entries);
  scan.Run(std::max(1, threads));
  GRANARY_ASSIGN_OR_RETURN(ManifestEntries entries, std::move(scan).Result());
  ManifestEntry root_entry;
  root_entry.type = EntryType::kDirectory;
  RecordStat(st, &root_entry);
  entries.push_back(std::move(root_entry));
  return entries;
}

}  // namespace granary
