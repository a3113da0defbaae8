// The mounts of this process's mount namespace as /proc/self/mountinfo lists
// them (proc(5)): where each is mounted, which directory of its filesystem it
// shows (a bind mount of /mnt/granary/imagenet shows "/imagenet" of the
// granary-fuse filesystem) and whether it is read-only. granary-csi keeps no
// state of its own: what it published is what this table shows, so a
// restarted granary-csi knows its volumes.
//
// Thread-safety: pure functions (ReadMountTable reads the kernel's table).
#ifndef GRANARY_CSI_MOUNT_TABLE_H_
#define GRANARY_CSI_MOUNT_TABLE_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace granary::csi_driver {

struct MountEntry {
  std::string device;       // "major:minor" of the filesystem.
  std::string root;         // The directory of the filesystem the mount shows.
  std::string mount_point;  // Where it is mounted.
  bool read_only = false;   // Of this mount (the per-mount "ro" option).
  std::string fs_type;      // e.g. "fuse.granary".
};

// The entries of mountinfo text, in the kernel's order (a mount listed later
// at the same point covers an earlier one). INVALID_ARGUMENT naming the line
// if one is malformed.
absl::StatusOr<std::vector<MountEntry>> ParseMountInfo(std::string_view text);

// ParseMountInfo of /proc/self/mountinfo.
absl::StatusOr<std::vector<MountEntry>> ReadMountTable();

// The mount visible at `mount_point` (the last one listed there), or nullptr.
const MountEntry* TopmostMountAt(const std::vector<MountEntry>& table,
                                 std::string_view mount_point);

}  // namespace granary::csi_driver

#endif  // GRANARY_CSI_MOUNT_TABLE_H_
