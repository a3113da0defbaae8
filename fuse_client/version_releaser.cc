#include "fuse_client/version_releaser.h"

#include <malloc.h>

#include "common/chunk_key.h"
#include "common/logging.h"

namespace granary::fuse {

VersionReleaser::VersionReleaser(InodeTable* table, DatasetRefresher* refresher,
                                 std::chrono::milliseconds period)
    : table_(table),
      refresher_(refresher),
      thread_(period, period, [this] { RefreshAndRelease(); }) {}

void VersionReleaser::RefreshAndRelease() {
  refresher_->MaybeRefresh();
  std::vector<std::shared_ptr<const MountedDataset>> released = table_->ReleaseUnused();
  for (const auto& dataset : released) {
    GRANARY_LOG(INFO) << "released dataset '" << dataset->name() << "' version "
                      << FormatVersion(dataset->snapshot().manifest.version()) << " ("
                      << dataset->snapshot().manifest.entries().size()
                      << " entries): refreshed away or removed, and no file of it open";
  }
  if (!released.empty()) {
    released.clear();
    // A manifest is many small allocations below the heap's top: without
    // this, the process keeps their pages (main.cc raises the trim
    // threshold for chunk buffers).
    malloc_trim(0);
  }
}

}  // namespace granary::fuse
