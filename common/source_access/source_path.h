// Where a POSIX source lives, and how its paths are opened: beneath the
// source's root, with no symlink followed at any component and no ".." or
// absolute path, so nothing a user writes into a source (a directory swapped
// for a symlink to a root-only one, say) can redirect granaryd or
// granary-fuse to a file outside it. Invariant 7 of DESIGN.md.
//
// OpenBeneath uses openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
// RESOLVE_NO_MAGICLINKS); on kernels without openat2 (before 5.6) it walks the
// path a component at a time with openat(O_NOFOLLOW), to the same effect.
//
// Thread-safety: pure functions; safe to call concurrently.
#ifndef GRANARY_COMMON_SOURCE_ACCESS_SOURCE_PATH_H_
#define GRANARY_COMMON_SOURCE_ACCESS_SOURCE_PATH_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/base/unique_fd.h"

namespace granary {

// The root directory named by `source` ("posix:///abs/path" or "/abs/path"),
// without trailing slashes. INVALID_ARGUMENT naming the source for another
// scheme, a relative path or an empty one.
absl::StatusOr<std::string> PosixRootOf(std::string_view source);

// Opens `path` (relative, '/'-separated) beneath the directory `root_fd` with
// `flags` (O_RDONLY, O_DIRECTORY, O_NONBLOCK, ...; O_NOFOLLOW and O_CLOEXEC
// are always added). Errors:
//  - FAILED_PRECONDITION naming the path when it is absolute, has a ".."
//    component, or any of its components is a symlink: the rule that sources
//    are read beneath their root without following symlinks refuses it;
//  - NOT_FOUND when a component does not exist or is not a directory;
//  - INVALID_ARGUMENT for an empty path or one not otherwise clean (an empty
//    or "." component, a NUL; see IsCleanDatasetPath);
//  - else the errno of the failed open (PERMISSION_DENIED, ...).
absl::StatusOr<UniqueFd> OpenBeneath(int root_fd, std::string_view path, int flags);

// The same as OpenBeneath, always by the component-by-component walk that
// OpenBeneath falls back to without openat2. Exposed for tests.
absl::StatusOr<UniqueFd> OpenBeneathByWalk(int root_fd, std::string_view path, int flags);

}  // namespace granary

#endif  // GRANARY_COMMON_SOURCE_ACCESS_SOURCE_PATH_H_
