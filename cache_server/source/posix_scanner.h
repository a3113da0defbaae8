// Scans a posix source into manifest entries, in parallel: worker threads take
// directories from a shared queue, list them and lstat every entry, so a tree
// of a million files on a network filesystem is not listed one round trip at
// a time. Every directory below the root is opened beneath it with no symlink
// followed (OpenBeneath, common/source_path.h), so a directory swapped for a
// symlink while the scan runs is skipped, never listed.
//
// What is recorded: the root (path ""), every directory, every regular file
// (empty ones included) with its size, mode and mtime, and every symlink whose
// target stays inside the tree, as a symlink (never followed). Symlinks that
// leave the tree, and sockets, FIFOs and devices, are skipped and logged.
//
// Thread-safety: ScanPosixTree is safe to call concurrently.
#ifndef GRANARY_CACHE_SERVER_SOURCE_POSIX_SCANNER_H_
#define GRANARY_CACHE_SERVER_SOURCE_POSIX_SCANNER_H_

#include <cstddef>
#include <limits>
#include <string>

#include "absl/status/statusor.h"
#include "common/manifest.h"

namespace granary {

// The entries under `root` (an absolute directory path), unsorted.
// NOT_FOUND naming the root when it does not exist, INVALID_ARGUMENT when it is
// not a directory, PERMISSION_DENIED naming the directory that cannot be read,
// RESOURCE_EXHAUSTED when the tree, root included, has more than `max_entries`
// entries (the scan stops soon after it finds out).
absl::StatusOr<ManifestEntries> ScanPosixTree(
    const std::string& root, int threads, size_t max_entries = std::numeric_limits<size_t>::max());

// Whether a symlink at `link_path` (relative to the root) with `target` points
// inside the tree, judged lexically. Exposed for tests.
bool SymlinkStaysInside(const std::string& link_path, const std::string& target);

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_SOURCE_POSIX_SCANNER_H_
