#include "fuse_client/detach_mount.h"

#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

namespace granary::fuse {

bool DetachMount(const std::string& mountpoint) {
  if (geteuid() == 0) {
    return umount2(mountpoint.c_str(), MNT_DETACH) == 0 || errno == EINVAL || errno == ENOENT;
  }
  pid_t child = fork();
  if (child == 0) {
    execlp("fusermount3", "fusermount3", "-u", "-z", "-q", mountpoint.c_str(), nullptr);
    _exit(127);
  }
  int status = 0;
  return child > 0 && waitpid(child, &status, 0) == child && WIFEXITED(status) &&
         WEXITSTATUS(status) == 0;
}

}  // namespace granary::fuse
