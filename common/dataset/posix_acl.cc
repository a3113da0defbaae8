#include "common/dataset/posix_acl.h"

#include <sys/stat.h>

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace granary {
namespace {

// The kernel's xattr form (linux/posix_acl_xattr.h): a little-endian header
// holding the version, then entries of tag (16 bits), permission bits (16)
// and a uid or gid (32).
constexpr uint32_t kXattrVersion = 2;
constexpr size_t kHeaderBytes = 4;
constexpr size_t kEntryBytes = 8;

enum Tag : uint16_t {
  kUserObj = 0x01,
  kUser = 0x02,
  kGroupObj = 0x04,
  kGroup = 0x08,
  kMask = 0x10,
  kOther = 0x20,
};

struct AclEntry {
  uint16_t tag;
  uint16_t perm;
  uint32_t id;
};

uint32_t LoadLittleEndian(const char* bytes, size_t width) {
  uint32_t value = 0;
  for (size_t i = width; i-- > 0;) value = (value << 8) | static_cast<unsigned char>(bytes[i]);
  return value;
}

size_t EntryCount(std::string_view acl) { return (acl.size() - kHeaderBytes) / kEntryBytes; }

AclEntry EntryAt(std::string_view acl, size_t i) {
  const char* at = acl.data() + kHeaderBytes + i * kEntryBytes;
  return {static_cast<uint16_t>(LoadLittleEndian(at, 2)),
          static_cast<uint16_t>(LoadLittleEndian(at + 2, 2)), LoadLittleEndian(at + 4, 4)};
}

// What the kernel's posix_acl_valid() accepts, order aside: one owner, one
// owning group and one other entry, known tags and bits, and a mask whenever
// a named user or group needs one.
bool IsValidAccessAcl(std::string_view acl) {
  if (acl.size() < kHeaderBytes || (acl.size() - kHeaderBytes) % kEntryBytes != 0 ||
      LoadLittleEndian(acl.data(), 4) != kXattrVersion) {
    return false;
  }
  int owners = 0, owning_groups = 0, others = 0, masks = 0, named = 0;
  for (size_t i = 0; i < EntryCount(acl); ++i) {
    const AclEntry entry = EntryAt(acl, i);
    if ((entry.perm & ~7u) != 0) return false;
    switch (entry.tag) {
      case kUserObj:
        ++owners;
        break;
      case kGroupObj:
        ++owning_groups;
        break;
      case kOther:
        ++others;
        break;
      case kMask:
        ++masks;
        break;
      case kUser:
      case kGroup:
        ++named;
        break;
      default:
        return false;
    }
  }
  return owners == 1 && owning_groups == 1 && others == 1 && masks <= 1 &&
         (named == 0 || masks == 1);
}

// The kernel's posix_acl_permission() for a caller that is not the owner: a
// named user's entry, else every group entry the caller is in (granted when
// one of them grants), else other; the mask bounds named users and groups.
// One pass: the mask, which may follow the entries it bounds, applies to all
// of them alike.
bool AclGrants(std::string_view acl, uint32_t file_gid, uint32_t uid,
               absl::FunctionRef<bool(uint32_t)> in_group, uint32_t wanted) {
  uint32_t mask = 7;
  uint32_t other = 0;
  std::optional<uint32_t> named_user;
  bool in_a_group = false;
  bool a_group_grants = false;
  for (size_t i = 0; i < EntryCount(acl); ++i) {
    const AclEntry entry = EntryAt(acl, i);
    switch (entry.tag) {
      case kMask:
        mask = entry.perm;
        break;
      case kOther:
        other = entry.perm;
        break;
      case kUser:
        if (entry.id == uid) named_user = entry.perm;
        break;
      case kGroupObj:
      case kGroup:
        if (in_group(entry.tag == kGroupObj ? file_gid : entry.id)) {
          in_a_group = true;
          a_group_grants = a_group_grants || (entry.perm & wanted) == wanted;
        }
        break;
    }
  }
  if (named_user) return (*named_user & mask & wanted) == wanted;
  if (in_a_group) return a_group_grants && (mask & wanted) == wanted;
  return (other & wanted) == wanted;
}

const std::string* FindXattr(const ManifestEntry& entry, std::string_view name) {
  const std::vector<ExtendedAttribute>& xattrs = entry.xattrs();
  auto it = std::lower_bound(
      xattrs.begin(), xattrs.end(), name,
      [](const ExtendedAttribute& xattr, std::string_view wanted) { return xattr.name < wanted; });
  return it != xattrs.end() && it->name == name ? &it->value : nullptr;
}

bool IsForeignAclXattr(std::string_view name) {
  return name.starts_with("system.") && name != kAccessAclXattr && name != kDefaultAclXattr &&
         (name.find("acl") != std::string_view::npos ||
          name.find("ntsd") != std::string_view::npos);
}

// The kind of `entry`'s ACL and, when it is kPosix, the access ACL.
std::pair<AclKind, const std::string*> AclOf(const ManifestEntry& entry) {
  const std::vector<ExtendedAttribute>& xattrs = entry.xattrs();
  if (xattrs.empty()) return {AclKind::kNone, nullptr};
  if (std::any_of(xattrs.begin(), xattrs.end(),
                  [](const ExtendedAttribute& xattr) { return IsForeignAclXattr(xattr.name); })) {
    return {AclKind::kUnevaluable, nullptr};
  }
  const std::string* access = FindXattr(entry, kAccessAclXattr);
  if (access == nullptr) return {AclKind::kNone, nullptr};
  if (!IsValidAccessAcl(*access)) return {AclKind::kUnevaluable, nullptr};
  return {AclKind::kPosix, access};
}

}  // namespace

bool IsAclXattr(std::string_view name) {
  return name == kAccessAclXattr || name == kDefaultAclXattr || IsForeignAclXattr(name);
}

AclKind AclKindOf(const ManifestEntry& entry) { return AclOf(entry).first; }

bool EntryGrants(const ManifestEntry& entry, uint32_t uid,
                 absl::FunctionRef<bool(uint32_t gid)> in_group, uint32_t wanted) {
  const uint32_t mode = entry.mode;
  if (uid == entry.uid) return ((mode >> 6) & wanted) == wanted;
  const auto [kind, access] = AclOf(entry);
  if (kind == AclKind::kUnevaluable) return false;
  // As the kernel: a mask (the group bits) of nothing leaves the mode bits to
  // decide.
  if (kind == AclKind::kPosix && (mode & S_IRWXG) != 0) {
    return AclGrants(*access, entry.gid, uid, in_group, wanted);
  }
  const uint32_t bits = in_group(entry.gid) ? mode >> 3 : mode;
  return (bits & wanted) == wanted;
}

bool SameAcls(const ManifestEntry& a, const ManifestEntry& b) {
  auto acls_of = [](const ManifestEntry& entry) {
    std::vector<const ExtendedAttribute*> acls;
    for (const ExtendedAttribute& xattr : entry.xattrs()) {
      if (IsAclXattr(xattr.name)) acls.push_back(&xattr);
    }
    return acls;
  };
  const std::vector<const ExtendedAttribute*> of_a = acls_of(a), of_b = acls_of(b);
  return std::equal(
      of_a.begin(), of_a.end(), of_b.begin(), of_b.end(),
      [](const ExtendedAttribute* x, const ExtendedAttribute* y) { return *x == *y; });
}

uint32_t ShownMode(const ManifestEntry& entry) {
  if (AclKindOf(entry) == AclKind::kUnevaluable) return entry.mode & ~uint32_t{S_IRWXG | S_IRWXO};
  return entry.mode;
}

}  // namespace granary
