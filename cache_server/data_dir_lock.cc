#include "cache_server/data_dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/base/file_util.h"
#include "common/base/status.h"

namespace granary {

absl::StatusOr<std::unique_ptr<DataDirLock>> DataDirLock::Acquire(const std::string& data_dir) {
  GRANARY_RETURN_IF_ERROR(CreatePrivateDirectory(data_dir, "data directory"));
  std::string path = absl::StrCat(data_dir, "/granaryd.lock");
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoStatus(errno, absl::StrCat("cannot open lock file ", path));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int lock_error = errno;
    char holder[32] = {};
    ssize_t n = ::pread(fd, holder, sizeof(holder) - 1, 0);
    ::close(fd);
    if (lock_error != EWOULDBLOCK) {
      return ErrnoStatus(lock_error, absl::StrCat("cannot lock ", path));
    }
    std::string pid(holder, n > 0 ? static_cast<size_t>(n) : 0);
    return absl::FailedPreconditionError(absl::StrCat(
        "another granaryd (pid ", absl::StripAsciiWhitespace(pid), ") is using data directory ",
        data_dir, "; stop it or choose another --data-dir"));
  }
  std::string pid = absl::StrCat(::getpid(), "\n");
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) < 0) {
    int write_error = errno;
    ::close(fd);
    return ErrnoStatus(write_error, absl::StrCat("cannot write lock file ", path));
  }
  return std::unique_ptr<DataDirLock>(new DataDirLock(fd));
}

DataDirLock::~DataDirLock() { ::close(fd_); }

}  // namespace granary
