// Protobuf messages as datagrams on a Unix SOCK_SEQPACKET socket, each with
// file descriptors attached or none (SCM_RIGHTS): the local read socket
// between granary-fuse and granaryd, and the socket between granary-fuse and
// the keeper of its FUSE connection.
//
// Thread-safety: plain functions; concurrent sends on one socket need the
// caller's lock only if their order matters.
#ifndef GRANARY_COMMON_NET_DATAGRAM_SOCKET_H_
#define GRANARY_COMMON_NET_DATAGRAM_SOCKET_H_

#include <sys/types.h>

#include <cstddef>
#include <span>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/base/unique_fd.h"
#include "google/protobuf/message_lite.h"

namespace granary {

// Sends `message` as one datagram on `socket`, with `passed_fds` attached.
// `socket_name` names the socket in errors.
absl::Status SendDatagram(int socket, const google::protobuf::MessageLite& message,
                          std::span<const int> passed_fds, std::string_view socket_name);
// The same with descriptor `passed_fd` attached when it is not -1.
absl::Status SendDatagram(int socket, const google::protobuf::MessageLite& message, int passed_fd,
                          std::string_view socket_name);

// Receives one datagram of at most `max_bytes` into `message`, and into
// `*passed` the descriptors attached to it, at most `max_fds` (a datagram
// with more, too long, or not parsing is refused with INVALID_ARGUMENT, and
// every descriptor it carried is closed). UNAVAILABLE when the peer has
// closed the connection.
absl::Status ReceiveDatagram(int socket, google::protobuf::MessageLite* message, size_t max_bytes,
                             size_t max_fds, std::vector<UniqueFd>* passed,
                             std::string_view socket_name);
// The same for at most one descriptor: `*passed_fd` gets it, which the
// caller must close, or -1.
absl::Status ReceiveDatagram(int socket, google::protobuf::MessageLite* message, size_t max_bytes,
                             int* passed_fd, std::string_view socket_name);

// The effective uid of the process at the other end of Unix socket `socket`,
// and its pid.
struct SocketPeer {
  uid_t uid = 0;
  pid_t pid = 0;
};
absl::StatusOr<SocketPeer> PeerOf(int socket);

}  // namespace granary

#endif  // GRANARY_COMMON_NET_DATAGRAM_SOCKET_H_
