#include "fuse_client/operations/mounted_version_releaser.h"

#include "common/base/logging.h"
#include "common/dataset/chunk_key.h"

namespace granary::fuse {

MountedVersionReleaser::MountedVersionReleaser(InodeTable* table, DatasetRefresher* refresher,
                                               std::chrono::milliseconds period)
    : table_(table),
      refresher_(refresher),
      thread_(period, period, [this] { RefreshAndRelease(); }) {}

void MountedVersionReleaser::RefreshAndRelease() {
  refresher_->MaybeRefresh();
  for (const InodeTable::Released& released : table_->ReleaseUnused()) {
    GRANARY_LOG(INFO) << "released dataset '" << released.name << "' version "
                      << FormatVersion(released.version)
                      << ": refreshed away or removed, and no file of it open";
  }
}

}  // namespace granary::fuse
