#include "cache_server/access/access_policy.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/base/absl_compat.h"
#include "common/dataset/posix_acl.h"

namespace granary {
namespace {

bool InGroup(const PeerCredentials& credentials, gid_t gid) {
  return credentials.gid == gid || std::find(credentials.groups.begin(), credentials.groups.end(),
                                             gid) != credentials.groups.end();
}

bool Grants(const ManifestEntry& entry, const PeerCredentials& credentials, uint32_t wanted) {
  return EntryGrants(
      entry, credentials.uid, [&](uint32_t gid) { return InGroup(credentials, gid); }, wanted);
}

}  // namespace

bool AccessPolicy::ChecksFiles(const Caller& caller) {
  return caller.channel == Caller::Channel::kUnixSocket && caller.credentials.uid != 0;
}

bool AccessPolicy::IsAdministrator(const PeerCredentials& credentials) const {
  return credentials.uid == 0 || (admin_gid_ && InGroup(credentials, *admin_gid_));
}

absl::Status AccessPolicy::Allow(const Caller& caller, Action action,
                                 std::string_view method) const {
  if (caller.channel == Caller::Channel::kTcp) {
    if (caller.cluster_member) return absl::OkStatus();
    return absl::UnauthenticatedError(
        absl::StrCat(AsAbsl(method),
                     " over TCP needs the cluster token (--token-file) or a certificate "
                     "of the cluster's CA"));
  }
  switch (action) {
    case Action::kDescribe:
    case Action::kRead:
    case Action::kPrewarm:
      return absl::OkStatus();
    case Action::kAdminister:
      if (IsAdministrator(caller.credentials)) return absl::OkStatus();
      return absl::PermissionDeniedError(absl::StrCat(
          AsAbsl(method), " is an administrator's act: it needs root",
          admin_group_.empty() ? "" : absl::StrCat(" or membership of group '", admin_group_, "'"),
          ", and the caller is ", DescribeCaller(caller)));
    case Action::kPeerExchange:
      return absl::PermissionDeniedError(
          absl::StrCat(AsAbsl(method), " is for cluster members over TCP, not local callers"));
  }
  return absl::InternalError("unknown action");
}

absl::Status AccessPolicy::AllowRead(const Caller& caller, const Manifest& manifest,
                                     uint64_t file_id) const {
  const ManifestEntries& entries = manifest.entries();
  if (file_id >= entries.size()) {
    return absl::NotFoundError(absl::StrCat("dataset version has no file ", file_id));
  }
  if (!ChecksFiles(caller)) return absl::OkStatus();
  const ManifestEntry& file = entries[file_id];
  auto refuse = [&](std::string_view why) {
    return absl::PermissionDeniedError(absl::StrCat("'", file.path, "' ", AsAbsl(why), " for ",
                                                    DescribeCaller(caller), ", as in the source"));
  };
  if (!Grants(file, caller.credentials, kMayRead)) return refuse("is not readable");
  std::string_view directory = file.path;
  do {
    directory = ParentPath(directory);
    std::optional<uint64_t> id = manifest.Find(directory);
    if (!id || !Grants(entries[*id], caller.credentials, kMayExecute)) {
      return refuse(
          absl::StrCat("lies in directory '", AsAbsl(directory), "', which is not searchable"));
    }
  } while (!directory.empty());
  return absl::OkStatus();
}

std::string DescribeCaller(const Caller& caller) {
  if (caller.channel == Caller::Channel::kUnixSocket) {
    return absl::StrCat("uid ", caller.credentials.uid, " (pid ", caller.credentials.pid,
                        ") on the Unix socket");
  }
  return absl::StrCat(caller.address, " over TCP",
                      caller.cluster_member ? " (cluster member)" : " (not authenticated)");
}

}  // namespace granary
