// The posix source: a dataset that lives in a directory of any POSIX
// filesystem (local disk, NFS, Lustre, ...), named "posix:///abs/path" or by a
// bare absolute path (PosixRootOf, common/source_path.h). Granary only ever
// reads it.
//
// ReadPosixFileRange() is how granaryd reads a byte range of one manifest
// entry: through VerifiedSourceFile (common/verified_source_file.h), which
// opens the file beneath the source's root without following any symlink and
// guarantees the bytes belong to the very file the manifest recorded, so that
// a file replaced, redirected, truncated or rewritten since registration
// fails with FAILED_PRECONDITION naming it instead of yielding bytes of
// another file or another version.
//
// Thread-safety: pure functions; safe to call concurrently.
#ifndef GRANARY_CACHE_SERVER_SOURCE_POSIX_SOURCE_H_
#define GRANARY_CACHE_SERVER_SOURCE_POSIX_SOURCE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "common/manifest.h"
#include "common/source_path.h"

namespace granary {

// Reads exactly `length` bytes at `offset` of file `entry` under `root`.
// FAILED_PRECONDITION naming the file when it is gone, reached through a
// symlink or no longer the file the entry recorded; PERMISSION_DENIED or
// another errno-derived code naming it when it cannot be read.
absl::StatusOr<std::string> ReadPosixFileRange(const std::string& root, const ManifestEntry& entry,
                                               uint64_t offset, uint32_t length);

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_SOURCE_POSIX_SOURCE_H_
