// VersionReleaser releases, from a thread of its own, the older dataset
// versions that no mount on this node keeps any more. A refresh retires the
// version it replaces; every `period`, each retired version that was retired
// at least `grace` ago and not listed as kept by a mount's use reports within
// the last `grace` (granary-fuse lists every version it shows or has files
// open of, every second) is dropped from the catalog with its manifest, and
// its cached chunks are freed (DatasetRegistry::ReleaseRetired). Reads over
// gRPC do not hold a version past its grace: an older version keeps the
// permissions the source had, and a reader must not keep them alive.
//
// Contract for readers: a file of an older version read through a mount on
// this node keeps reading it, from the cache, while the mount keeps the
// version. Once the version is released here, such reads go to the version's
// other owners or to the source, which serves the files the source still
// holds unchanged and answers ESTALE for the others: bytes of two versions
// are never mixed. Holds are per node: each server releases by its own
// readers (Catalog explains why the catalogs still converge).
//
// Nothing is released during the first `grace` after start: uses are not
// kept across restarts, and mounts need a report to say what they keep.
//
// Thread-safety: the thread is the only user of the parts; the destructor
// stops it.
#ifndef GRANARY_CACHE_SERVER_CATALOG_VERSION_RELEASER_H_
#define GRANARY_CACHE_SERVER_CATALOG_VERSION_RELEASER_H_

#include <chrono>

#include "cache_server/catalog/dataset_registry.h"
#include "cache_server/catalog/version_activity.h"
#include "common/base/periodic_thread.h"

namespace granary {

class VersionReleaser {
 public:
  // `registry` and `activity` must outlive the releaser.
  VersionReleaser(DatasetRegistry* registry, VersionActivity* activity,
                  std::chrono::milliseconds grace, std::chrono::milliseconds period);
  VersionReleaser(const VersionReleaser&) = delete;
  VersionReleaser& operator=(const VersionReleaser&) = delete;

 private:
  void ReleaseRetired();

  DatasetRegistry* const registry_;
  VersionActivity* const activity_;
  const std::chrono::milliseconds grace_;
  PeriodicThread thread_;  // Last: starts once the rest exists.
};

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_CATALOG_VERSION_RELEASER_H_
