#include "common/source_access/source_path.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/base/absl_compat.h"
#include "common/base/status.h"
#include "common/dataset/manifest.h"

namespace granary {
namespace {

constexpr std::string_view kRule =
    "a source's files are opened beneath its root, never through a symlink or '..'";

// Set once openat2 answered ENOSYS: this kernel predates it.
std::atomic<bool> openat2_missing{false};

absl::Status Redirected(std::string_view path, std::string_view why) {
  return absl::FailedPreconditionError(
      absl::StrCat("source path '", AsAbsl(path), "' ", AsAbsl(why), "; ", AsAbsl(kRule)));
}

// The status of a failed open of `path` with `error` (an errno).
absl::Status OpenError(std::string_view path, int error) {
  switch (error) {
    case ELOOP:
      return Redirected(path, "passes through a symlink");
    case EXDEV:
      return Redirected(path, "leaves the source root");
    case ENOENT:
    case ENOTDIR:
      return absl::NotFoundError(absl::StrCat("source path '", AsAbsl(path),
                                              "' does not exist (or a parent is not a directory)"));
    default:
      return ErrnoStatus(error, absl::StrCat("open source path '", AsAbsl(path), "'"));
  }
}

// Refuses, before any system call, what openat2 would let through
// (RESOLVE_BENEATH allows a ".." that stays inside) or misread (a NUL ends a
// C string early), so that both ways of opening refuse the same paths.
absl::Status CheckLexically(std::string_view path) {
  if (path.empty()) return absl::InvalidArgumentError("empty source path");
  if (path.front() == '/') return Redirected(path, "is absolute");
  for (absl::string_view part : absl::StrSplit(AsAbsl(path), '/')) {
    if (part == "..") return Redirected(path, "has a '..' component");
  }
  if (!IsCleanDatasetPath(path)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "source path '", AsAbsl(path), "' is not clean (an empty or '.' component, or a NUL)"));
  }
  return absl::OkStatus();
}

// openat2() beneath `root_fd` through no symlink; the fd or -1 with errno.
int Openat2(int root_fd, const std::string& path, int flags) {
  struct open_how how = {};
  how.flags = static_cast<uint64_t>(flags | O_NOFOLLOW | O_CLOEXEC);
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  return static_cast<int>(::syscall(SYS_openat2, root_fd, path.c_str(), &how, sizeof(how)));
}

// A component that openat() with O_NOFOLLOW | O_DIRECTORY refused with
// ENOTDIR may be a symlink; say so (ELOOP), as openat2 does.
int SymlinkAwareErrno(int dir_fd, const std::string& name, int error) {
  struct stat st;
  if (error == ENOTDIR && ::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
      S_ISLNK(st.st_mode)) {
    return ELOOP;
  }
  return error;
}

absl::StatusOr<UniqueFd> Walk(int root_fd, std::string_view path, int flags) {
  std::vector<std::string> parts = absl::StrSplit(AsAbsl(path), '/');
  // Directories on the way are opened O_PATH: crossing one needs search
  // permission on it, as in any lookup, and not read permission.
  UniqueFd dir;
  for (size_t i = 0; i < parts.size(); ++i) {
    const bool last = i + 1 == parts.size();
    const int at = dir.valid() ? dir.get() : root_fd;
    const int open_flags = (last ? flags : O_PATH | O_DIRECTORY) | O_NOFOLLOW | O_CLOEXEC;
    int fd = ::openat(at, parts[i].c_str(), open_flags);
    if (fd < 0) return OpenError(path, SymlinkAwareErrno(at, parts[i], errno));
    dir = UniqueFd(fd);
  }
  return dir;
}

}  // namespace

absl::StatusOr<std::string> PosixRootOf(std::string_view source) {
  std::string_view path = source;
  if (absl::StartsWith(AsAbsl(source), "posix://")) {
    path.remove_prefix(8);
  } else if (source.find("://") != std::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("source '", AsAbsl(source),
                     "' has an unsupported scheme; use posix:///path or an absolute path"));
  }
  if (path.empty() || path.front() != '/') {
    return absl::InvalidArgumentError(absl::StrCat(
        "source '", AsAbsl(source), "' is not an absolute path (posix:///path or /path)"));
  }
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  return std::string(path);
}

absl::StatusOr<UniqueFd> OpenBeneathByWalk(int root_fd, std::string_view path, int flags) {
  if (absl::Status lexical = CheckLexically(path); !lexical.ok()) return lexical;
  return Walk(root_fd, path, flags);
}

absl::StatusOr<UniqueFd> OpenBeneath(int root_fd, std::string_view path, int flags) {
  if (absl::Status lexical = CheckLexically(path); !lexical.ok()) return lexical;
  if (!openat2_missing.load(std::memory_order_relaxed)) {
    const std::string name(path);
    int fd = Openat2(root_fd, name, flags);
    if (fd >= 0) return UniqueFd(fd);
    int error = errno;
    if (error != ENOSYS) {
      // O_DIRECTORY on a final symlink fails with ENOTDIR; an O_PATH open of
      // the same path yields the symlink itself, which says why.
      if (error == ENOTDIR) {
        UniqueFd last(Openat2(root_fd, name, O_PATH));
        struct stat st;
        if (last.valid() && ::fstat(last.get(), &st) == 0 && S_ISLNK(st.st_mode)) error = ELOOP;
      }
      return OpenError(path, error);
    }
    openat2_missing.store(true, std::memory_order_relaxed);
  }
  return Walk(root_fd, path, flags);
}

}  // namespace granary
