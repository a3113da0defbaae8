// The posix source: a dataset that lives in a directory of any POSIX
// filesystem (local disk, NFS, Lustre, ...), named "posix:///abs/path" or by a
// bare absolute path. Granary only ever reads it.
//
// ReadPosixFileRange() reads a byte range of one manifest entry and guarantees
// the bytes belong to the manifest's version of the file: it checks the file's
// size and mtime against the entry before and after reading, so that a file
// replaced, truncated or rewritten since registration fails with
// FAILED_PRECONDITION naming it instead of yielding bytes of another version.
//
// Thread-safety: pure functions; safe to call concurrently.
#ifndef GRANARY_CACHE_SERVER_SOURCE_POSIX_SOURCE_H_
#define GRANARY_CACHE_SERVER_SOURCE_POSIX_SOURCE_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/manifest.h"

namespace granary {

// The root directory named by `source`. INVALID_ARGUMENT naming the source for
// another scheme, a relative path or an empty one.
absl::StatusOr<std::string> PosixRootOf(std::string_view source);

// Reads exactly `length` bytes at `offset` of file `entry` under `root`.
// FAILED_PRECONDITION naming the file when it is gone or no longer matches the
// entry; PERMISSION_DENIED or another errno-derived code naming it when it
// cannot be read.
absl::StatusOr<std::string> ReadPosixFileRange(const std::string& root, const ManifestEntry& entry,
                                               uint64_t offset, uint32_t length);

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_SOURCE_POSIX_SOURCE_H_
