#include "cache_server/catalog/version_releaser.h"

#include <malloc.h>

#include "common/base/wall_clock.h"

namespace granary {

VersionReleaser::VersionReleaser(DatasetRegistry* registry, VersionActivity* activity,
                                 std::chrono::milliseconds grace, std::chrono::milliseconds period)
    : registry_(registry),
      activity_(activity),
      grace_(grace),
      thread_(grace + period, period, [this] { ReleaseRetired(); }) {}

void VersionReleaser::ReleaseRetired() {
  size_t released = registry_->ReleaseRetired(NowUnixMs(), grace_, [this](uint64_t version) {
    return activity_->KeptWithin(version, grace_);
  });
  // A manifest is many small allocations: without this, freeing them
  // leaves the process holding their pages.
  if (released > 0) malloc_trim(0);
}

}  // namespace granary
