// Caller is who made one call to granaryd: a local process on the Unix
// socket, known by the credentials the kernel recorded when it connected
// (SO_PEERCRED, SO_PEERGROUPS), or a remote one over TCP, known by its
// address and by whether it proved membership of the cluster (the cluster
// token, or a client certificate the cluster's CA signed).
//
// Thread-safety: a plain value.
#ifndef GRANARY_CACHE_SERVER_ACCESS_CALLER_H_
#define GRANARY_CACHE_SERVER_ACCESS_CALLER_H_

#include <sys/types.h>

#include <string>
#include <vector>

namespace granary {

struct PeerCredentials {
  uid_t uid = static_cast<uid_t>(-1);
  gid_t gid = static_cast<gid_t>(-1);
  pid_t pid = 0;
  // Supplementary groups, as the kernel saw them at connect().
  std::vector<gid_t> groups;
};

struct Caller {
  enum class Channel { kUnixSocket, kTcp };
  Channel channel = Channel::kTcp;
  // kUnixSocket only.
  PeerCredentials credentials;
  // kTcp: "ipv4:10.0.0.7:51234" as gRPC names it; kUnixSocket: "unix".
  std::string address;
  // kTcp: presented the cluster token or a certificate of the cluster's CA.
  bool cluster_member = false;
};

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_ACCESS_CALLER_H_
