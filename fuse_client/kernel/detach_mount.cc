#include "fuse_client/kernel/detach_mount.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "common/base/logging.h"
#include "common/base/status.h"
#include "common/base/unique_fd.h"

namespace granary::fuse {
namespace {

// A mount point as its parent directory, held open, and its name there.
struct MountPointAt {
  UniqueFd parent;
  std::string name;
};

absl::Status Redirected(const std::string& mountpoint, const std::string& what) {
  return absl::FailedPreconditionError(absl::StrCat(
      "mount point ", mountpoint, ": ", what,
      " is a symlink now; a mount point is never reached through one, so nothing was detached"));
}

absl::StatusOr<MountPointAt> OpenParent(const std::string& mountpoint) {
  std::string_view path = mountpoint;
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  const size_t slash = path.rfind('/');
  MountPointAt at;
  if (slash != std::string_view::npos) at.name = std::string(path.substr(slash + 1));
  if (path.empty() || path.front() != '/' || at.name.empty() || at.name == "." || at.name == "..") {
    return absl::InvalidArgumentError(
        absl::StrCat("mount point '", mountpoint, "' is not an absolute path to a directory"));
  }
  const std::string parent(slash == 0 ? "/" : path.substr(0, slash));
  open_how how = {};
  how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
  how.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  at.parent = UniqueFd(
      static_cast<int>(::syscall(SYS_openat2, AT_FDCWD, parent.c_str(), &how, sizeof(how))));
  if (at.parent.valid()) return at;
  const int error = errno;
  if (error == ELOOP) return Redirected(mountpoint, absl::StrCat("a directory of ", parent));
  if (error == ENOENT || error == ENOTDIR) {
    return absl::NotFoundError(absl::StrCat("mount point ", mountpoint, " does not exist"));
  }
  return ErrnoStatus(error, absl::StrCat("opening the directory of mount point ", mountpoint));
}

// What is mounted at `at`, looked at without following a symlink there and
// without asking the filesystem mounted there (AT_STATX_DONT_SYNC).
absl::StatusOr<MountIdentity> MountAt(const MountPointAt& at, const std::string& mountpoint) {
  struct statx found = {};
  if (::statx(at.parent.get(), at.name.c_str(),
              AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT | AT_STATX_DONT_SYNC, STATX_TYPE | STATX_MNT_ID,
              &found) != 0) {
    const int error = errno;
    if (error == ENOENT) {
      return absl::NotFoundError(absl::StrCat("mount point ", mountpoint, " does not exist"));
    }
    return ErrnoStatus(error, absl::StrCat("statx of mount point ", mountpoint));
  }
  if (S_ISLNK(found.stx_mode)) return Redirected(mountpoint, "the mount point itself");
  if ((found.stx_mask & STATX_MNT_ID) == 0 ||
      (found.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot tell which mount is at ", mountpoint,
                     ": statx shows no mount id (Linux 5.8 or later does)"));
  }
  if ((found.stx_attributes & STATX_ATTR_MOUNT_ROOT) == 0) {
    return absl::NotFoundError(absl::StrCat("nothing is mounted at ", mountpoint));
  }
  return MountIdentity{.mount_id = found.stx_mnt_id,
                       .device = makedev(found.stx_dev_major, found.stx_dev_minor)};
}

// fusermount3, setuid root, itself unmounts only a mount of the calling
// user, from its parent directory and with UMOUNT_NOFOLLOW.
absl::Status DetachAsUser(const std::string& mountpoint) {
  const pid_t child = ::fork();
  if (child == 0) {
    ::execlp("fusermount3", "fusermount3", "-u", "-z", "-q", mountpoint.c_str(), nullptr);
    ::_exit(127);
  }
  int status = 0;
  if (child > 0 && ::waitpid(child, &status, 0) == child && WIFEXITED(status) &&
      WEXITSTATUS(status) == 0) {
    return absl::OkStatus();
  }
  return absl::InternalError(absl::StrCat("fusermount3 -u -z ", mountpoint, " failed"));
}

}  // namespace

absl::StatusOr<MountIdentity> IdentifyMount(const std::string& mountpoint) {
  absl::StatusOr<MountPointAt> at = OpenParent(mountpoint);
  if (!at.ok()) return at.status();
  return MountAt(*at, mountpoint);
}

absl::Status DetachMount(const std::string& mountpoint, const MountIdentity& expected) {
  GRANARY_ASSIGN_OR_RETURN(MountPointAt at, OpenParent(mountpoint));
  GRANARY_ASSIGN_OR_RETURN(MountIdentity found, MountAt(at, mountpoint));
  if (found != expected) {
    return absl::FailedPreconditionError(
        absl::StrCat("mount point ", mountpoint, " holds mount ", found.mount_id, " (device ",
                     major(found.device), ":", minor(found.device), "), not mount ",
                     expected.mount_id, " (device ", major(expected.device), ":",
                     minor(expected.device), ") that was mounted there; nothing was detached"));
  }
  if (::geteuid() != 0) return DetachAsUser(mountpoint);
  // The name is looked up in the directory verified above, and not followed.
  const std::string verified = absl::StrCat("/proc/self/fd/", at.parent.get(), "/", at.name);
  if (::umount2(verified.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW) == 0) return absl::OkStatus();
  const int error = errno;
  if (error == EINVAL) return absl::OkStatus();  // Unmounted meanwhile by someone else.
  return ErrnoStatus(error, absl::StrCat("detaching ", mountpoint));
}

bool DetachMount(const std::string& mountpoint) {
  absl::StatusOr<MountIdentity> mounted = IdentifyMount(mountpoint);
  if (absl::IsNotFound(mounted.status())) return true;
  absl::Status detached = mounted.ok() ? DetachMount(mountpoint, *mounted) : mounted.status();
  if (!detached.ok()) GRANARY_LOG(WARNING) << detached;
  return detached.ok();
}

}  // namespace granary::fuse
