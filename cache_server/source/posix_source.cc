#include "cache_server/source/posix_source.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/absl_compat.h"
#include "common/chunk_key.h"
#include "common/file_util.h"
#include "common/status.h"

namespace granary {
namespace {

int64_t MtimeNs(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
}

// FAILED_PRECONDITION unless `st` still describes the registered `entry`.
absl::Status CheckUnchanged(const struct stat& st, const ManifestEntry& entry) {
  if (!S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "source file '", entry.path, "' is no longer a regular file; refresh the dataset"));
  }
  if (static_cast<uint64_t>(st.st_size) != entry.size || MtimeNs(st) != entry.mtime_ns) {
    return absl::FailedPreconditionError(absl::StrCat(
        "source file '", entry.path, "' changed since it was registered (size ", entry.size, " -> ",
        st.st_size, ", mtime ", entry.mtime_ns, " -> ", MtimeNs(st), "); refresh the dataset"));
  }
  return absl::OkStatus();
}

class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

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

absl::StatusOr<std::string> ReadPosixFileRange(const std::string& root, const ManifestEntry& entry,
                                               uint64_t offset, uint32_t length) {
  std::string path = absl::StrCat(root, "/", entry.path);
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (fd.get() < 0) {
    int error = errno;
    if (error == ENOENT || error == ENOTDIR || error == ELOOP) {
      return absl::FailedPreconditionError(absl::StrCat(
          "source file '", entry.path, "' no longer exists at ", path, "; refresh the dataset"));
    }
    return ErrnoStatus(error, absl::StrCat("source file '", entry.path, "' (", path, ")"));
  }
  struct stat before;
  if (::fstat(fd.get(), &before) != 0) {
    return ErrnoStatus(errno, absl::StrCat("stat source file '", entry.path, "'"));
  }
  GRANARY_RETURN_IF_ERROR(CheckUnchanged(before, entry));
  std::string data(length, '\0');
  GRANARY_ASSIGN_OR_RETURN(
      size_t read, PreadUntilFullOrEnd(fd.get(), offset, data,
                                       absl::StrCat("read source file '", entry.path, "'")));
  if (read < length) {
    return absl::FailedPreconditionError(absl::StrCat(
        "source file '", entry.path, "' was truncated while being read; refresh the dataset"));
  }
  // A rewrite during the read would mix bytes of two versions; the second check
  // catches it.
  struct stat after;
  if (::fstat(fd.get(), &after) != 0) {
    return ErrnoStatus(errno, absl::StrCat("stat source file '", entry.path, "'"));
  }
  GRANARY_RETURN_IF_ERROR(CheckUnchanged(after, entry));
  return data;
}

}  // namespace granary
