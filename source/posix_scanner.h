// Scans a posix source into manifest entries, in parallel: worker threads take
// directories from a shared queue, list them and lstat every entry, so a tree
// of a million files on a network filesystem is not listed one round trip at
// a time. Every directory below the root is opened beneath it with no symlink
// followed (OpenBeneath, common/source_access/source_path.h), so a directory swapped for a
// symlink while the scan runs is skipped, never listed.
//
// What is recorded: the root (path ""), every directory and every regular
// file (empty ones included) with its size, mode, owner, link count, times
// user.* extended attributes and ACLs, and every symlink whose target stays inside
// the tree, as a symlink (never followed). An absolute target inside the
// tree (under the root as given or as resolved) is rewritten relative to the
// link, so it points at the same entry through the mount. Symlinks that
// leave the tree, and sockets, FIFOs and devices, are skipped: listed with
// the reason in the result (and so by `granary dataset show`).
//
// Times are kept as int64 nanoseconds since 1970 (1677-09-21 to 2262-04-11);
// one outside that range is clamped to it.
//
// Thread-safety: ScanPosixTree is safe to call concurrently.
#ifndef GRANARY_SOURCE_POSIX_SCANNER_H_
#define GRANARY_SOURCE_POSIX_SCANNER_H_

#include <cstddef>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/dataset/manifest.h"
#include "source/source.h"

namespace granary {

// The entries under `root` (an absolute directory path).
// NOT_FOUND naming the root when it does not exist, INVALID_ARGUMENT when it is
// not a directory, PERMISSION_DENIED naming the directory that cannot be read,
// RESOURCE_EXHAUSTED when the tree, root included, has more than `max_entries`
// entries (the scan stops soon after it finds out).
absl::StatusOr<ScannedTree> ScanPosixTree(const std::string& root, int threads,
                                          size_t max_entries = std::numeric_limits<size_t>::max());

// The target to record for a symlink at `link_path` (relative to the root)
// whose target is `target`, judged lexically: a relative target as it is if
// it stays inside the tree; an absolute one under one of `absolute_roots`
// (the root's absolute forms) rewritten relative to the link's directory;
// nullopt for a target that leaves the tree. Exposed for tests.
std::optional<std::string> InTreeSymlinkTarget(std::string_view link_path, std::string_view target,
                                               const std::vector<std::string>& absolute_roots);

}  // namespace granary

#endif  // GRANARY_SOURCE_POSIX_SCANNER_H_
