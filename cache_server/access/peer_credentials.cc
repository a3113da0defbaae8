#include "cache_server/access/peer_credentials.h"

#include <sys/socket.h>

#include <cerrno>
#include <vector>

#include "common/base/status.h"

namespace granary {

absl::StatusOr<PeerCredentials> PeerCredentialsOf(int unix_socket) {
  ucred credentials{};
  socklen_t length = sizeof(credentials);
  if (::getsockopt(unix_socket, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) {
    return ErrnoStatus(errno, "SO_PEERCRED");
  }
  PeerCredentials peer{credentials.uid, credentials.gid, credentials.pid, {}};
  std::vector<gid_t> groups(64);
  for (;;) {
    length = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
    if (::getsockopt(unix_socket, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &length) == 0) break;
    if (errno != ERANGE) return ErrnoStatus(errno, "SO_PEERGROUPS");
    groups.resize(length / sizeof(gid_t) + 1);
  }
  groups.resize(length / sizeof(gid_t));
  peer.groups = std::move(groups);
  return peer;
}

absl::StatusOr<Caller> UnixSocketCaller(int unix_socket) {
  Caller caller;
  caller.channel = Caller::Channel::kUnixSocket;
  caller.address = "unix";
  GRANARY_ASSIGN_OR_RETURN(caller.credentials, PeerCredentialsOf(unix_socket));
  return caller;
}

}  // namespace granary
