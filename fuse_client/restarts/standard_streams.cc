#include "fuse_client/restarts/standard_streams.h"

#include <fcntl.h>
#include <unistd.h>

namespace granary::fuse {

void RedirectStandardStreams(const std::string& stderr_path) {
  const int null_fd = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  ::dup2(null_fd, STDIN_FILENO);
  ::dup2(null_fd, STDOUT_FILENO);
  ::close(null_fd);
  if (stderr_path.empty()) return;
  const int log_fd = ::open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) return;
  ::dup2(log_fd, STDERR_FILENO);
  ::close(log_fd);
}

}  // namespace granary::fuse
