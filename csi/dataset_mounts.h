// DatasetMounts publishes datasets of the node's granary-fuse mount into
// target directories: a read-only (nosuid, nodev) bind mount of the one
// dataset directory, so a pod sees the dataset it asked for and nothing else
// of the mount. It keeps no state: what is published is what the mount table
// shows, so publishing and unpublishing are idempotent and survive a restart
// of granary-csi. Mounts need CAP_SYS_ADMIN (root) in the mount namespace
// whose targets the kubelet uses.
//
// A target_path is never followed where it is a symlink (a user who may
// write the pod's volume directory could point it anywhere): its directory
// is opened as given, the name in it without following a link, and the bind
// mount goes on that descriptor, so a swap after the check redirects
// nothing. Unpublishing unmounts through the directory opened, with
// UMOUNT_NOFOLLOW.
//
// Errors follow the CSI specification: a dataset the mount does not show is
// NOT_FOUND; a target that holds another mount is ALREADY_EXISTS; a mount
// that is not granary-fuse's is FAILED_PRECONDITION, one whose granary-fuse
// no longer answers UNAVAILABLE; a dataset directory that cannot be opened is
// FAILED_PRECONDITION, and so is a target_path that is a symlink. Every
// message names the path and what was wrong.
//
// Thread-safety: every method may be called concurrently, for different
// targets (CSI's COs serialise calls per volume; the node service also does).
#ifndef GRANARY_CSI_DATASET_MOUNTS_H_
#define GRANARY_CSI_DATASET_MOUNTS_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "csi/mount_table.h"

namespace granary::csi_driver {

// The filesystem type granary-fuse's mounts show in the mount table.
inline constexpr char kGranaryFsType[] = "fuse.granary";

class DatasetMounts {
 public:
  // `mount_root`: granary-fuse's mount point, an absolute path as the mount
  // table lists it (no symlinks, no trailing '/').
  explicit DatasetMounts(std::string mount_root);

  const std::string& mount_root() const { return mount_root_; }

  // OK when granary-fuse is mounted at mount_root() and answers.
  absl::Status CheckServing() const;

  // Publishes dataset `dataset` at `target` (created if missing, never
  // followed if a symlink); OK if that very dataset is already published
  // there read-only.
  absl::Status Publish(std::string_view dataset, const std::string& target) const;

  // Removes every mount at `target`, then the directory; OK if there is
  // nothing to remove. A symlink at `target` is left alone, refused.
  absl::Status Unpublish(const std::string& target) const;

  // The name of the dataset published at `path`; NOT_FOUND if none is.
  absl::StatusOr<std::string> PublishedDataset(const std::string& path) const;

 private:
  // The mount-table entry of the granary-fuse mount at mount_root().
  absl::StatusOr<MountEntry> GranaryMount(const std::vector<MountEntry>& table) const;
  // OK when `source`, the dataset's directory, exists and can be opened.
  absl::Status CheckDatasetReadable(std::string_view dataset, const std::string& source) const;

  std::string mount_root_;
};

}  // namespace granary::csi_driver

#endif  // GRANARY_CSI_DATASET_MOUNTS_H_
