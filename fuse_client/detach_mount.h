// Detaches the mount at a mount point at once, as `umount -l` does: new
// lookups stop reaching it, and the kernel ends it when its last open file is
// closed. Root calls umount2() itself; other users ask fusermount3.
//
// Thread-safety: a plain function; it may fork, so call it before threads
// start or where fork() of the whole process is acceptable (it only execs).
#ifndef GRANARY_FUSE_CLIENT_DETACH_MOUNT_H_
#define GRANARY_FUSE_CLIENT_DETACH_MOUNT_H_

#include <string>

namespace granary::fuse {

// Whether the mount is gone (or was never there).
bool DetachMount(const std::string& mountpoint);

}  // namespace granary::fuse

#endif  // GRANARY_FUSE_CLIENT_DETACH_MOUNT_H_
