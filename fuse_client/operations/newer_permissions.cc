#include "fuse_client/operations/newer_permissions.h"

#include <optional>
#include <string_view>

#include "common/dataset/posix_acl.h"

namespace granary::fuse {
namespace {

bool SamePermissions(const ManifestEntry& older, const ManifestEntry& newer) {
  constexpr uint32_t kPermissionBits = 07777;
  return older.type == newer.type && older.uid == newer.uid && older.gid == newer.gid &&
         (older.mode & kPermissionBits) == (newer.mode & kPermissionBits) && SameAcls(older, newer);
}

}  // namespace

bool NewerKeepsPermissions(const Manifest& older, uint64_t file_id, const Manifest& newer) {
  if (file_id >= older.entries().size()) return false;
  std::string_view path = older.entries()[file_id].path;
  while (true) {
    std::optional<uint64_t> was = older.Find(path);
    std::optional<uint64_t> is = newer.Find(path);
    if (was.has_value() != is.has_value()) return false;
    if (was && !SamePermissions(older.entries()[*was], newer.entries()[*is])) return false;
    // A root the manifests do not list is the mount's own, alike in both.
    if (path.empty()) return true;
    path = ParentPath(path);
  }
}

}  // namespace granary::fuse
