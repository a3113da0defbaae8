// MountDevice names the device of the last mount on a mount point
// ("major:minor", as /proc/self/mountinfo lists it), read from the mount
// table alone: the mount point itself is never looked at, since the caller
// may be the FUSE server that would have to answer that look.
//
// Thread-safety: reentrant.
#ifndef GRANARY_FUSE_CLIENT_KERNEL_MOUNT_DEVICE_H_
#define GRANARY_FUSE_CLIENT_KERNEL_MOUNT_DEVICE_H_

#include <optional>
#include <string>

namespace granary::fuse {

// std::nullopt when nothing is mounted on `mountpoint` (an absolute path).
std::optional<std::string> MountDevice(const std::string& mountpoint);

}  // namespace granary::fuse

#endif  // GRANARY_FUSE_CLIENT_KERNEL_MOUNT_DEVICE_H_
