#include "common/base/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/base/absl_compat.h"
#include "common/base/status.h"

namespace granary {

absl::StatusOr<std::string> ReadFileToString(const std::string& path, std::string_view what) {
  std::string context = absl::StrCat(AsAbsl(what), " ", path);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, context);
  std::string content;
  char buffer[64 << 10];
  while (true) {
    ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      absl::Status error = ErrnoStatus(errno, context);
      ::close(fd);
      return error;
    }
    if (n == 0) break;
    content.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  return content;
}

absl::StatusOr<size_t> PreadUntilFullOrEnd(int fd, uint64_t offset, std::span<char> out,
                                           std::string_view context) {
  size_t done = 0;
  while (done < out.size()) {
    ssize_t n =
        ::pread(fd, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus(errno, context);
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  return done;
}

absl::Status CreatePrivateDirectory(const std::string& path, std::string_view what) {
  std::error_code error;
  if (std::filesystem::exists(path, error) && !std::filesystem::is_directory(path, error)) {
    return absl::FailedPreconditionError(
        absl::StrCat(AsAbsl(what), " ", path, " exists but is not a directory"));
  }
  std::filesystem::create_directories(path, error);
  if (error) {
    return ErrnoStatus(error.value(), absl::StrCat("cannot create ", AsAbsl(what), " ", path));
  }
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return ErrnoStatus(errno, absl::StrCat(AsAbsl(what), " ", path));
  }
  // On a read-only filesystem nothing will be written there to protect; the
  // caller's own checks name that.
  if ((st.st_mode & 077) != 0 && ::chmod(path.c_str(), st.st_mode & 0700) != 0 && errno != EROFS) {
    return ErrnoStatus(errno,
                       absl::StrCat("cannot make ", AsAbsl(what), " ", path, " private (0700)"));
  }
  return absl::OkStatus();
}

}  // namespace granary
