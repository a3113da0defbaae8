#include "common/datagram_socket.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "common/absl_compat.h"
#include "common/status.h"

namespace granary {

absl::Status SendDatagram(int socket, const google::protobuf::MessageLite& message, int passed_fd,
                          std::string_view socket_name) {
  std::string bytes = message.SerializeAsString();
  iovec data{bytes.data(), bytes.size()};
  msghdr header{};
  header.msg_iov = &data;
  header.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  if (passed_fd != -1) {
    header.msg_control = control;
    header.msg_controllen = sizeof(control);
    cmsghdr* attached = CMSG_FIRSTHDR(&header);
    attached->cmsg_level = SOL_SOCKET;
    attached->cmsg_type = SCM_RIGHTS;
    attached->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(attached), &passed_fd, sizeof(int));
  }
  ssize_t sent;
  do {
    sent = ::sendmsg(socket, &header, MSG_NOSIGNAL);
  } while (sent < 0 && errno == EINTR);
  if (sent < 0) return ErrnoStatus(errno, absl::StrCat("sending on ", AsAbsl(socket_name)));
  return absl::OkStatus();
}

absl::Status ReceiveDatagram(int socket, google::protobuf::MessageLite* message, size_t max_bytes,
                             int* passed_fd, std::string_view socket_name) {
  *passed_fd = -1;
  auto bytes = std::make_unique_for_overwrite<char[]>(max_bytes);
  iovec data{bytes.get(), max_bytes};
  msghdr header{};
  header.msg_iov = &data;
  header.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  header.msg_control = control;
  header.msg_controllen = sizeof(control);
  ssize_t received;
  do {
    received = ::recvmsg(socket, &header, MSG_CMSG_CLOEXEC);
  } while (received < 0 && errno == EINTR);
  if (received < 0) return ErrnoStatus(errno, absl::StrCat("receiving on ", AsAbsl(socket_name)));
  for (cmsghdr* attached = CMSG_FIRSTHDR(&header); attached != nullptr;
       attached = CMSG_NXTHDR(&header, attached)) {
    if (attached->cmsg_level == SOL_SOCKET && attached->cmsg_type == SCM_RIGHTS) {
      std::memcpy(passed_fd, CMSG_DATA(attached), sizeof(int));
    }
  }
  if (received == 0 && *passed_fd == -1) {
    return absl::UnavailableError(absl::StrCat(AsAbsl(socket_name), " was closed by its peer"));
  }
  absl::Status status;
  if ((header.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0) {
    status = absl::InvalidArgumentError(
        absl::StrCat("a message on ", AsAbsl(socket_name), " was over the size limit"));
  } else if (!message->ParseFromArray(bytes.get(), static_cast<int>(received))) {
    status = absl::InvalidArgumentError(
        absl::StrCat("a message on ", AsAbsl(socket_name), " could not be parsed"));
  }
  if (!status.ok() && *passed_fd != -1) {
    ::close(*passed_fd);
    *passed_fd = -1;
  }
  return status;
}

absl::StatusOr<SocketPeer> PeerOf(int socket) {
  ucred peer{};
  socklen_t length = sizeof(peer);
  if (::getsockopt(socket, SOL_SOCKET, SO_PEERCRED, &peer, &length) != 0) {
    return ErrnoStatus(errno, "SO_PEERCRED");
  }
  return SocketPeer{.uid = peer.uid, .pid = peer.pid};
}

}  // namespace granary
