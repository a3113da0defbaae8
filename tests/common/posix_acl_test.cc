// EntryGrants against the kernel's rules for POSIX ACLs, on ACLs written in
// the kernel's xattr form, and the fail-closed rule for ACLs Granary cannot
// evaluate.
#include "common/dataset/posix_acl.h"

#include <sys/stat.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace granary {
namespace {

constexpr uint32_t kOwner = 1000, kBob = 1001, kCarol = 1002;
constexpr uint32_t kOwningGroup = 500, kTeam = 600;

struct Ace {
  uint16_t tag;
  uint16_t perm;
  uint32_t id = 0;
};
constexpr uint16_t kUserObj = 0x01, kUser = 0x02, kGroupObj = 0x04, kGroup = 0x08, kMask = 0x10,
                   kOther = 0x20;

void AppendLittleEndian(uint32_t value, int bytes, std::string* out) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

// An access ACL as getxattr(system.posix_acl_access) returns it.
std::string Acl(std::initializer_list<Ace> aces, uint32_t version = 2) {
  std::string out;
  AppendLittleEndian(version, 4, &out);
  for (const Ace& ace : aces) {
    AppendLittleEndian(ace.tag, 2, &out);
    AppendLittleEndian(ace.perm, 2, &out);
    AppendLittleEndian(ace.id, 4, &out);
  }
  return out;
}

ManifestEntry File(uint32_t mode, std::vector<ExtendedAttribute> xattrs = {}) {
  ManifestEntry entry;
  entry.path.assign(1, 'f');
  entry.mode = S_IFREG | mode;
  entry.uid = kOwner;
  entry.gid = kOwningGroup;
  entry.set_xattrs(std::move(xattrs));
  return entry;
}

ManifestEntry WithAccessAcl(uint32_t mode, std::string acl) {
  return File(mode, {{std::string(kAccessAclXattr), std::move(acl)}});
}

// Bob's groups are his own alone; Carol is in kTeam.
bool Reads(const ManifestEntry& entry, uint32_t uid, uint32_t wanted = kMayRead) {
  return EntryGrants(
      entry, uid, [uid](uint32_t gid) { return uid == kCarol && gid == kTeam; }, wanted);
}

TEST(PosixAclTest, WithoutAnAclTheModeDecides) {
  EXPECT_TRUE(Reads(File(0644), kBob));
  EXPECT_FALSE(Reads(File(0640), kBob));
  EXPECT_TRUE(Reads(File(0600), kOwner));
  EXPECT_FALSE(Reads(File(0044), kOwner)) << "the owner's bits alone apply to the owner";
  EXPECT_EQ(AclKindOf(File(0644, {{"user.origin", "x"}})), AclKind::kNone);
}

TEST(PosixAclTest, ANamedUserWithNoPermissionsIsRefusedAFileOthersRead) {
  // setfacl -m u:bob:--- on a 0644 file (the mask becomes r--).
  const ManifestEntry entry = WithAccessAcl(
      0644, Acl({{kUserObj, 6}, {kUser, 0, kBob}, {kGroupObj, 4}, {kMask, 4}, {kOther, 4}}));
  EXPECT_EQ(AclKindOf(entry), AclKind::kPosix);
  EXPECT_FALSE(Reads(entry, kBob));
  EXPECT_TRUE(Reads(entry, kCarol));
  EXPECT_TRUE(Reads(entry, kOwner));
}

TEST(PosixAclTest, ANamedUserOrGroupIsGrantedWithinTheMask) {
  // 0600 root file with u:bob:r-- and g:team:r--: mask r--, mode 0640.
  const ManifestEntry granted = WithAccessAcl(0640, Acl({{kUserObj, 6},
                                                         {kUser, 4, kBob},
                                                         {kGroupObj, 0},
                                                         {kGroup, 4, kTeam},
                                                         {kMask, 4},
                                                         {kOther, 0}}));
  EXPECT_TRUE(Reads(granted, kBob));
  EXPECT_TRUE(Reads(granted, kCarol));
  EXPECT_FALSE(Reads(granted, 4242));
  // The mask bounds named entries: u:bob:rwx with a mask of --x.
  const ManifestEntry masked = WithAccessAcl(
      0610, Acl({{kUserObj, 6}, {kUser, 7, kBob}, {kGroupObj, 0}, {kMask, 1}, {kOther, 0}}));
  EXPECT_FALSE(Reads(masked, kBob));
  EXPECT_TRUE(Reads(masked, kBob, kMayExecute));
}

TEST(PosixAclTest, AGroupMatchWithoutThePermissionRefusesEvenWhenOthersMayRead) {
  const ManifestEntry entry = WithAccessAcl(
      0644, Acl({{kUserObj, 6}, {kGroupObj, 4}, {kGroup, 0, kTeam}, {kMask, 4}, {kOther, 4}}));
  EXPECT_FALSE(Reads(entry, kCarol));
  EXPECT_TRUE(Reads(entry, kBob));
}

TEST(PosixAclTest, AnEmptyMaskLeavesTheModeToDecideAsTheKernelDoes) {
  // The kernel consults the ACL only when the group bits (the mask) are set.
  const ManifestEntry entry = WithAccessAcl(
      0604, Acl({{kUserObj, 6}, {kUser, 0, kBob}, {kGroupObj, 4}, {kMask, 0}, {kOther, 4}}));
  EXPECT_TRUE(Reads(entry, kBob));
}

TEST(PosixAclTest, AclsThatCannotBeEvaluatedAreTheOwnersAlone) {
  const std::vector<ManifestEntry> unevaluable = {
      File(0644, {{"system.nfs4_acl", std::string(40, '\1')}}),
      File(0644, {{"system.richacl", "x"}}),
      WithAccessAcl(0644, ""),  // Could not be read at scan time.
      WithAccessAcl(0644, Acl({{kUserObj, 6}, {kGroupObj, 4}, {kOther, 4}}, /*version=*/3)),
      WithAccessAcl(0644, Acl({{kUserObj, 6}, {kUser, 4, kBob}, {kGroupObj, 4}, {kOther, 4}})),
      WithAccessAcl(0644, Acl({{kUserObj, 6}, {kGroupObj, 4}, {0x40, 4}, {kOther, 4}})),
      WithAccessAcl(0644, Acl({{kUserObj, 6}, {kGroupObj, 4}})),
      WithAccessAcl(0644, Acl({{kUserObj, 6}, {kGroupObj, 4}, {kOther, 4}}) + "\1"),
  };
  for (const ManifestEntry& entry : unevaluable) {
    EXPECT_EQ(AclKindOf(entry), AclKind::kUnevaluable);
    EXPECT_FALSE(Reads(entry, kBob));
    EXPECT_FALSE(Reads(entry, kCarol));
    EXPECT_TRUE(Reads(entry, kOwner));
    EXPECT_EQ(ShownMode(entry), S_IFREG | 0600u) << "the mount shows what the kernel enforces";
  }
  EXPECT_EQ(ShownMode(File(0644)), S_IFREG | 0644u);
}

TEST(PosixAclTest, EntriesHaveTheSameAclsWhenEveryAclAttributeIsEqual) {
  const std::string denies_bob =
      Acl({{kUserObj, 6}, {kUser, 0, kBob}, {kGroupObj, 4}, {kMask, 4}, {kOther, 4}});
  const ManifestEntry plain = File(0644, {{"user.origin", "a"}});
  EXPECT_TRUE(SameAcls(plain, File(0644, {{"user.origin", "b"}})));
  EXPECT_FALSE(SameAcls(plain, WithAccessAcl(0644, denies_bob)));
  EXPECT_TRUE(SameAcls(WithAccessAcl(0644, denies_bob), WithAccessAcl(0644, denies_bob)));
  EXPECT_FALSE(SameAcls(
      WithAccessAcl(0644, denies_bob),
      WithAccessAcl(
          0644, Acl({{kUserObj, 6}, {kUser, 4, kBob}, {kGroupObj, 4}, {kMask, 4}, {kOther, 4}}))));
  EXPECT_FALSE(SameAcls(plain, File(0644, {{"system.nfs4_acl", "x"}, {"user.origin", "a"}})));
}

TEST(PosixAclTest, TheScannerKeepsAclsAndUserAttributesOnly) {
  EXPECT_TRUE(IsAclXattr(kAccessAclXattr));
  EXPECT_TRUE(IsAclXattr(kDefaultAclXattr));
  EXPECT_TRUE(IsAclXattr("system.nfs4_acl"));
  EXPECT_TRUE(IsAclXattr("system.cifs_ntsd"));
  EXPECT_FALSE(IsAclXattr("security.selinux"));
  EXPECT_FALSE(IsAclXattr("trusted.overlay.opaque"));
  EXPECT_FALSE(IsAclXattr("user.acl"));
}

}  // namespace
}  // namespace granary
