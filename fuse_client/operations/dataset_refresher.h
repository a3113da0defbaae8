// DatasetRefresher keeps the mount root in step with the server's datasets:
// it lists them and publishes the set to the InodeTable, so datasets
// registered after the mount appear in its root and removed ones disappear
// from it (open files of a removed or refreshed version keep their
// snapshot). A new version is loaded at once if its dataset is being read
// (the table has a version of it in memory) or is the only one shown, and
// when first used otherwise. With `only` set, just that dataset is shown.
//
// Thread-safety: every method may be called concurrently; one refresh runs at
// a time, and MaybeRefresh() never waits for another caller's refresh.
#ifndef GRANARY_FUSE_CLIENT_OPERATIONS_DATASET_REFRESHER_H_
#define GRANARY_FUSE_CLIENT_OPERATIONS_DATASET_REFRESHER_H_

#include <chrono>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "client/dataset_client.h"
#include "common/base/mutex.h"
#include "fuse_client/operations/inode_table.h"

namespace granary::fuse {

class DatasetRefresher {
 public:
  // `client` and `table` must outlive the refresher. `min_interval` bounds how
  // often MaybeRefresh() asks the server.
  DatasetRefresher(const DatasetClient* client, InodeTable* table, std::string only,
                   std::chrono::milliseconds min_interval)
      : client_(client), table_(table), only_(std::move(only)), min_interval_(min_interval) {}

  // Refreshes now. Fails if the server cannot list the datasets, with
  // NOT_FOUND if `only` is not among them, or if `only`'s manifest cannot be
  // fetched. A new version loaded now whose manifest cannot be fetched (or
  // parsed) is skipped, logged once per version, and tried again at the
  // next refresh, its dataset showing the version before; one loaded on
  // first use that cannot be answers EIO (InodeTable). Either way one broken
  // dataset never keeps the others from being mounted.
  absl::Status Refresh();

  // Refreshes unless one ran less than `min_interval` ago or is running;
  // errors are logged, and the root keeps its previous datasets.
  void MaybeRefresh();

 private:
  absl::Status RefreshLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  const DatasetClient* const client_;
  InodeTable* const table_;
  const std::string only_;
  const std::chrono::milliseconds min_interval_;
  Mutex mutex_;
  std::chrono::steady_clock::time_point last_attempt_ ABSL_GUARDED_BY(mutex_);
  // Versions whose manifest could not be loaded, logged already.
  std::set<std::pair<std::string, uint64_t>> unloadable_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace granary::fuse

#endif  // GRANARY_FUSE_CLIENT_OPERATIONS_DATASET_REFRESHER_H_
