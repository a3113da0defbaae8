// FindCurrentEntry finds, for a file of any version of a dataset, the entry
// the dataset's current version has at the same path. A read of an older
// version is judged by it as well as by its own version's entry, so that a
// permission the source took away since (a chmod, a chown, a removal) holds
// for every version this node still keeps: the current source's permissions
// always win (GranaryService::AllowRead).
//
// Thread-safety: reads the catalog, which is thread-safe.
#ifndef GRANARY_CACHE_SERVER_CATALOG_CURRENT_ENTRY_H_
#define GRANARY_CACHE_SERVER_CATALOG_CURRENT_ENTRY_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "cache_server/catalog/catalog.h"
#include "common/dataset/manifest.h"

namespace granary {

struct CurrentEntry {
  std::shared_ptr<const Manifest> manifest;  // Of the dataset's current version.
  uint64_t file_id = 0;                      // In `manifest`.
};

// The current version's entry for the path that file `file_id` has in
// `manifest`; `manifest` itself when it is the current version. NOT_FOUND
// when `file_id` is past the end of `manifest` or the dataset is gone;
// PERMISSION_DENIED naming the path and both versions when the current
// version has no regular file there (removed, or replaced by a directory or
// a symlink).
absl::StatusOr<CurrentEntry> FindCurrentEntry(Catalog& catalog,
                                              std::shared_ptr<const Manifest> manifest,
                                              uint64_t file_id);

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_CATALOG_CURRENT_ENTRY_H_
