#include "fuse_client/source_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/absl_compat.h"
#include "common/file_util.h"
#include "common/status.h"

namespace granary::fuse {
namespace {

constexpr std::string_view kPosixScheme = "posix://";

// The root directory of a POSIX source; empty for other schemes.
std::string_view PosixRoot(std::string_view source) {
  if (absl::StartsWith(AsAbsl(source), AsAbsl(kPosixScheme))) {
    return source.substr(kPosixScheme.size());
  }
  if (source.find("://") != std::string_view::npos) return {};
  return source;
}

}  // namespace

SourceFile::~SourceFile() {
  if (fd_ >= 0) close(fd_);
}

std::string SourceFile::Path() const {
  std::string_view root = PosixRoot(source_);
  if (root.empty()) return std::string(source_);
  std::string path(root);
  if (!entry_.path.empty()) absl::StrAppend(&path, path.ends_with('/') ? "" : "/", entry_.path);
  return path;
}

absl::StatusOr<int> SourceFile::Open() {
  std::lock_guard lock(mutex_);
  if (fd_ >= 0) return fd_;
  GRANARY_RETURN_IF_ERROR(open_status_);
  if (PosixRoot(source_).empty()) {
    return absl::UnimplementedError(
        absl::StrCat("source '", AsAbsl(source_), "' cannot be read directly (not POSIX)"));
  }
  std::string path = Path();
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, absl::StrCat("open source file ", path));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    absl::Status status = ErrnoStatus(errno, absl::StrCat("stat source file ", path));
    close(fd);
    return status;
  }
  int64_t mtime_ns = int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec;
  if (static_cast<uint64_t>(st.st_size) != entry_.size || mtime_ns != entry_.mtime_ns) {
    close(fd);
    open_status_ = absl::FailedPreconditionError(absl::StrCat(
        "source file ", path, " changed since the dataset was registered: size ", st.st_size,
        " mtime_ns ", mtime_ns, ", manifest size ", entry_.size, " mtime_ns ", entry_.mtime_ns));
    return open_status_;
  }
  fd_ = fd;
  return fd_;
}

absl::Status SourceFile::ReadExactly(uint64_t offset, std::span<char> out) {
  GRANARY_ASSIGN_OR_RETURN(int fd, Open());
  GRANARY_ASSIGN_OR_RETURN(
      size_t read, PreadUntilFullOrEnd(fd, offset, out, absl::StrCat("read source file ", Path())));
  if (read < out.size()) {
    return absl::FailedPreconditionError(
        absl::StrCat("source file ", Path(), " shrank below ", offset + out.size(), " bytes"));
  }
  return absl::OkStatus();
}

}  // namespace granary::fuse
