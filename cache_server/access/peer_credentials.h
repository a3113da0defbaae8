// PeerCredentialsOf says who is at the other end of a connected Unix socket:
// the uid, gid and pid the kernel recorded when the peer connected
// (SO_PEERCRED) and its supplementary groups (SO_PEERGROUPS), which is what
// every check of a local caller (AccessPolicy) judges.
//
// Thread-safety: reentrant.
#ifndef GRANARY_CACHE_SERVER_ACCESS_PEER_CREDENTIALS_H_
#define GRANARY_CACHE_SERVER_ACCESS_PEER_CREDENTIALS_H_

#include "absl/status/statusor.h"
#include "cache_server/access/caller.h"

namespace granary {

absl::StatusOr<PeerCredentials> PeerCredentialsOf(int unix_socket);

// A caller on a Unix socket, known by PeerCredentialsOf(`unix_socket`).
absl::StatusOr<Caller> UnixSocketCaller(int unix_socket);

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_ACCESS_PEER_CREDENTIALS_H_
