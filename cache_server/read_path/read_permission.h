// AllowFileRead is the one check of a read of a file's bytes, by whatever
// path it comes (gRPC's ReadChunk, the local socket's batches): the caller
// may read file `file_id` of `manifest` (AccessPolicy::AllowRead) both as its
// version recorded it and as the dataset's current version does
// (FindCurrentEntry), so that what the source took away since is taken away
// from every version. Callers for whom AccessPolicy::ChecksFiles is false
// (root, cluster members) pass without a lookup.
//
// Thread-safety: reentrant; reads the catalog, which is thread-safe.
#ifndef GRANARY_CACHE_SERVER_READ_PATH_READ_PERMISSION_H_
#define GRANARY_CACHE_SERVER_READ_PATH_READ_PERMISSION_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "cache_server/access/access_policy.h"
#include "cache_server/access/caller.h"
#include "cache_server/catalog/catalog.h"
#include "common/dataset/manifest.h"

namespace granary {

absl::Status AllowFileRead(const AccessPolicy& policy, Catalog& catalog, const Caller& caller,
                           const std::shared_ptr<const Manifest>& manifest, uint64_t file_id);

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_READ_PATH_READ_PERMISSION_H_
