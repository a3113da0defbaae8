// AccessPolicy is invariant 7 of DESIGN.md for the calls granaryd answers:
// what each Caller (cache_server/access/caller.h) may do. Nobody reads through
// Granary what they could not read without it, and registering a source is an
// administrator's act.
//
//   TCP, cluster member      everything: other granaryd servers, and tools
//   (token or certificate)   holding the cluster's secret. A peer serves its
//                            own callers and checks their permissions itself.
//   TCP, anyone else         nothing (UNAUTHENTICATED).
//   Unix socket, root        everything but ExchangeCatalog.
//   Unix socket, admin group as root.
//   Unix socket, other uid   describe (list datasets, manifests, status,
//                            locate, members), prewarm, and read the bytes of
//                            a file only when the source's owner, group and
//                            mode (and ACL) let that uid read it and search every
//                            directory above it up to the source root.
//   ExchangeCatalog          cluster members over TCP only.
//
// Permissions are those the manifest recorded from the source (uid, gid,
// mode and POSIX ACL of each entry), checked the way the kernel checks them
// (common/dataset/posix_acl.h): the owner's bits for the owner, else the access ACL
// when the entry has one, else the group's bits for a member of the file's
// group (primary or supplementary, as the kernel saw them at connect), else
// the others'. An entry whose ACL cannot be evaluated (NFSv4) is its owner's
// alone. Directories above the source root are not consulted: an
// administrator who registers a source publishes it with its own modes.
//
// Thread-safety: immutable; every method may be called concurrently.
#ifndef GRANARY_CACHE_SERVER_ACCESS_ACCESS_POLICY_H_
#define GRANARY_CACHE_SERVER_ACCESS_ACCESS_POLICY_H_

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "cache_server/access/caller.h"
#include "common/dataset/manifest.h"

namespace granary {

class AccessPolicy {
 public:
  enum class Action {
    kDescribe,      // Datasets, manifests, status, locate, members.
    kRead,          // Chunk bytes; AllowRead() decides per file.
    kPrewarm,       // Fill the cache with a dataset.
    kAdminister,    // Register, refresh, remove datasets.
    kPeerExchange,  // Replicate the catalog or locality reports between servers.
  };

  // `admin_gid` (the group named `admin_group`) unset: root alone
  // administers over the Unix socket.
  AccessPolicy(std::optional<gid_t> admin_gid, std::string admin_group)
      : admin_gid_(admin_gid), admin_group_(std::move(admin_group)) {}

  // OK, or PERMISSION_DENIED (UNAUTHENTICATED for a TCP caller that is not a
  // member) naming the caller, `method` and the rule.
  absl::Status Allow(const Caller& caller, Action action, std::string_view method) const;

  // OK when `caller` may read file `file_id` of `manifest` (see above);
  // PERMISSION_DENIED naming the file and the caller otherwise; NOT_FOUND
  // when the manifest has no such file.
  absl::Status AllowRead(const Caller& caller, const Manifest& manifest, uint64_t file_id) const;

  // Whether reads by `caller` need AllowRead at all (a Unix-socket caller
  // other than root).
  static bool ChecksFiles(const Caller& caller);

 private:
  bool IsAdministrator(const PeerCredentials& credentials) const;

  std::optional<gid_t> admin_gid_;
  std::string admin_group_;
};

// "uid 1000 (pid 4242) on the Unix socket" or "10.0.0.7:51234 over TCP
// (cluster member)": who a caller is, for errors and the audit log.
std::string DescribeCaller(const Caller& caller);

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_ACCESS_ACCESS_POLICY_H_
