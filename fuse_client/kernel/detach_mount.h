// Detaches the mount at a mount point at once, as `umount -l` does: new
// lookups stop reaching it, and the kernel ends it when its last open file is
// closed. Root calls umount2() itself; other users ask fusermount3.
//
// Unmounting runs as root on paths other users may shape (a directory above
// a mount point may be theirs to rename), so a mount point is reached
// without following any symlink: its parent is opened with openat2
// (RESOLVE_NO_SYMLINKS) and the mount is detached through that descriptor
// with UMOUNT_NOFOLLOW, only once what is found there is known to be the
// mount meant (its mount id and device, as statx shows them). Nothing here
// asks the filesystem mounted there anything: a FUSE mount whose server died
// would never answer.
//
// Thread-safety: plain functions; DetachMount may fork, so call it before
// threads start or where fork() of the whole process is acceptable (it only
// execs).
#ifndef GRANARY_FUSE_CLIENT_KERNEL_DETACH_MOUNT_H_
#define GRANARY_FUSE_CLIENT_KERNEL_DETACH_MOUNT_H_

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace granary::fuse {

// Which mount a mount point held when it was looked at. Mount ids are
// reused once a mount is gone, devices too: both must match.
struct MountIdentity {
  uint64_t mount_id = 0;
  dev_t device = 0;
  bool operator==(const MountIdentity&) const = default;
};

// The mount whose root is at `mountpoint`, an absolute path. NOT_FOUND when
// nothing is mounted there (or the path does not exist); FAILED_PRECONDITION
// when a component of the path is a symlink.
absl::StatusOr<MountIdentity> IdentifyMount(const std::string& mountpoint);

// Detaches the mount at `mountpoint` if it is still `expected`.
// FAILED_PRECONDITION, detaching nothing, when the path passes through a
// symlink or holds another mount (or none).
absl::Status DetachMount(const std::string& mountpoint, const MountIdentity& expected);

// Detaches whatever mount is at `mountpoint`, reached without symlinks.
// Whether the mount is gone (or was never there); a refusal is logged.
bool DetachMount(const std::string& mountpoint);

}  // namespace granary::fuse

#endif  // GRANARY_FUSE_CLIENT_KERNEL_DETACH_MOUNT_H_
