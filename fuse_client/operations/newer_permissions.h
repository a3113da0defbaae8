// Whether a newer version of a dataset still grants what an older one did
// along a file's path: granary-fuse serves a new open in a version it no
// longer shows only then (fuse_ops.cc), so that a permission the source took
// away (a chmod, a chown, a removal) is taken away from every version the
// mount still holds for its open files and directories. The kernel checked
// the caller against the older version's attributes (default_permissions);
// the newer version must therefore list the same path as a regular file,
// and it and every directory above it with the same owner, group,
// permission bits and ACLs. Any change refuses, a loosening too: which changes
// tighten depends on the caller, and the newer version's own path is there
// to open instead.
//
// Thread-safety: a pure function of immutable manifests.
#ifndef GRANARY_FUSE_CLIENT_OPERATIONS_NEWER_PERMISSIONS_H_
#define GRANARY_FUSE_CLIENT_OPERATIONS_NEWER_PERMISSIONS_H_

#include <cstdint>

#include "common/dataset/manifest.h"

namespace granary::fuse {

// Whether `newer` lists the path of file `file_id` of `older` as a regular
// file, with the owner, group, permission bits and ACLs of `older` on it and
// on every directory above it.
bool NewerKeepsPermissions(const Manifest& older, uint64_t file_id, const Manifest& newer);

}  // namespace granary::fuse

#endif  // GRANARY_FUSE_CLIENT_OPERATIONS_NEWER_PERMISSIONS_H_
