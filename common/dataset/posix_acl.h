// Access control lists of manifest entries. A source's POSIX ACLs travel in
// its entries' extended attributes exactly as Linux hands them out
// (system.posix_acl_access and, on directories, system.posix_acl_default, in
// the kernel's binary form), so the mount can give them to the kernel
// unchanged and granaryd can judge its own callers by them. EntryGrants
// decides the way the kernel's generic permission check does: the owner by
// the owner's mode bits, then the access ACL when the entry has one, else the
// group's or others' mode bits.
//
// An ACL Granary cannot evaluate (an NFSv4, CIFS or rich ACL, or a POSIX one
// that does not parse) fails closed: the entry grants its owner's bits to its
// owner and nothing to anyone else (root is not judged here: callers that
// bypass permission checks never ask).
//
// Thread-safety: stateless functions of their arguments.
#ifndef GRANARY_COMMON_DATASET_POSIX_ACL_H_
#define GRANARY_COMMON_DATASET_POSIX_ACL_H_

#include <cstdint>
#include <string_view>

#include "absl/functional/function_ref.h"
#include "common/dataset/manifest.h"

namespace granary {

inline constexpr std::string_view kAccessAclXattr = "system.posix_acl_access";
inline constexpr std::string_view kDefaultAclXattr = "system.posix_acl_default";

// Permission bits as ACL entries and the "other" class of a mode hold them.
inline constexpr uint32_t kMayRead = 4;
inline constexpr uint32_t kMayExecute = 1;  // Search, for a directory.

// Whether a source's extended attribute `name` is one of the ACLs a manifest
// keeps: the two POSIX ones, and the system.* ACLs of other models (kept so
// that their entries fail closed).
bool IsAclXattr(std::string_view name);

enum class AclKind {
  kNone,         // Mode bits alone decide.
  kPosix,        // A POSIX access ACL that parses.
  kUnevaluable,  // An ACL of another model, or one that does not parse.
};
AclKind AclKindOf(const ManifestEntry& entry);

// Whether `entry` grants every bit of `wanted` (kMayRead, kMayExecute) to
// `uid` with the groups `in_group` says it is in (primary and supplementary).
bool EntryGrants(const ManifestEntry& entry, uint32_t uid,
                 absl::FunctionRef<bool(uint32_t gid)> in_group, uint32_t wanted);

// Whether `a` and `b` carry the same ACLs, attribute for attribute: with the
// same owner, group and mode, they grant the same callers the same access.
bool SameAcls(const ManifestEntry& a, const ManifestEntry& b);

// The permission bits a mount shows for `entry`: its mode, less the group's
// and others' bits when its ACL cannot be evaluated, so that the kernel
// enforces the same owner-only rule.
uint32_t ShownMode(const ManifestEntry& entry);

}  // namespace granary

#endif  // GRANARY_COMMON_DATASET_POSIX_ACL_H_
