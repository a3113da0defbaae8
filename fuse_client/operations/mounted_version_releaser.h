// MountedVersionReleaser drops, from a thread of its own, the dataset versions a
// mount no longer needs. Every `period` it refreshes the dataset list
// (DatasetRefresher::MaybeRefresh), so that a version refreshed away on the
// server is retired even on a mount nobody looks at, then asks the
// InodeTable to release the versions retired at least the table's
// `release_after` ago that no open file or request holds, and logs each.
// Their manifests and directory structures are then freed, their inodes
// answer ESTALE, and the mount stops reporting them to granaryd as kept.
// The same pass drops loaded versions over the table's memory budget that
// have been closed since they were loaded.
//
// Thread-safety: the thread is the only user; the destructor stops it.
#ifndef GRANARY_FUSE_CLIENT_OPERATIONS_MOUNTED_VERSION_RELEASER_H_
#define GRANARY_FUSE_CLIENT_OPERATIONS_MOUNTED_VERSION_RELEASER_H_

#include <chrono>

#include "common/base/periodic_thread.h"
#include "fuse_client/operations/dataset_refresher.h"
#include "fuse_client/operations/inode_table.h"

namespace granary::fuse {

class MountedVersionReleaser {
 public:
  // `table` and `refresher` must outlive the releaser.
  MountedVersionReleaser(InodeTable* table, DatasetRefresher* refresher,
                         std::chrono::milliseconds period);
  MountedVersionReleaser(const MountedVersionReleaser&) = delete;
  MountedVersionReleaser& operator=(const MountedVersionReleaser&) = delete;

 private:
  void RefreshAndRelease();

  InodeTable* const table_;
  DatasetRefresher* const refresher_;
  PeriodicThread thread_;  // Last: starts once the rest exists.
};

}  // namespace granary::fuse

#endif  // GRANARY_FUSE_CLIENT_OPERATIONS_MOUNTED_VERSION_RELEASER_H_
