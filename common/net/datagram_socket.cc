#include "common/net/datagram_socket.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "common/base/absl_compat.h"
#include "common/base/status.h"

namespace granary {

absl::Status SendDatagram(int socket, const google::protobuf::MessageLite& message,
                          std::span<const int> passed_fds, std::string_view socket_name) {
  std::string bytes = message.SerializeAsString();
  iovec data{bytes.data(), bytes.size()};
  msghdr header{};
  header.msg_iov = &data;
  header.msg_iovlen = 1;
  std::vector<char> control;
  if (!passed_fds.empty()) {
    const size_t fd_bytes = passed_fds.size() * sizeof(int);
    control.assign(CMSG_SPACE(fd_bytes), 0);
    header.msg_control = control.data();
    header.msg_controllen = control.size();
    cmsghdr* attached = CMSG_FIRSTHDR(&header);
    attached->cmsg_level = SOL_SOCKET;
    attached->cmsg_type = SCM_RIGHTS;
    attached->cmsg_len = CMSG_LEN(fd_bytes);
    std::memcpy(CMSG_DATA(attached), passed_fds.data(), fd_bytes);
  }
  ssize_t sent;
  do {
    sent = ::sendmsg(socket, &header, MSG_NOSIGNAL);
  } while (sent < 0 && errno == EINTR);
  if (sent < 0) return ErrnoStatus(errno, absl::StrCat("sending on ", AsAbsl(socket_name)));
  return absl::OkStatus();
}

absl::Status SendDatagram(int socket, const google::protobuf::MessageLite& message, int passed_fd,
                          std::string_view socket_name) {
  return SendDatagram(
      socket, message,
      passed_fd == -1 ? std::span<const int>() : std::span<const int>(&passed_fd, 1), socket_name);
}

absl::Status ReceiveDatagram(int socket, google::protobuf::MessageLite* message, size_t max_bytes,
                             size_t max_fds, std::vector<UniqueFd>* passed,
                             std::string_view socket_name) {
  passed->clear();
  auto bytes = std::make_unique_for_overwrite<char[]>(max_bytes);
  iovec data{bytes.get(), max_bytes};
  msghdr header{};
  header.msg_iov = &data;
  header.msg_iovlen = 1;
  // cmsghdr elements keep the buffer aligned as CMSG_* need; the kernel
  // closes descriptors beyond its room and says so (MSG_CTRUNC).
  const size_t control_bytes = CMSG_SPACE(std::max<size_t>(max_fds, 1) * sizeof(int));
  std::vector<cmsghdr> control((control_bytes + sizeof(cmsghdr) - 1) / sizeof(cmsghdr));
  header.msg_control = control.data();
  header.msg_controllen = control_bytes;
  ssize_t received;
  do {
    received = ::recvmsg(socket, &header, MSG_CMSG_CLOEXEC);
  } while (received < 0 && errno == EINTR);
  if (received < 0) return ErrnoStatus(errno, absl::StrCat("receiving on ", AsAbsl(socket_name)));
  for (cmsghdr* attached = CMSG_FIRSTHDR(&header); attached != nullptr;
       attached = CMSG_NXTHDR(&header, attached)) {
    if (attached->cmsg_level != SOL_SOCKET || attached->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (attached->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(attached) + i * sizeof(int), sizeof(int));
      passed->emplace_back(fd);
    }
  }
  if (received == 0 && passed->empty()) {
    return absl::UnavailableError(absl::StrCat(AsAbsl(socket_name), " was closed by its peer"));
  }
  absl::Status status;
  if ((header.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0 || passed->size() > max_fds) {
    status = absl::InvalidArgumentError(
        absl::StrCat("a message on ", AsAbsl(socket_name), " was over the size limit"));
  } else if (!message->ParseFromArray(bytes.get(), static_cast<int>(received))) {
    status = absl::InvalidArgumentError(
        absl::StrCat("a message on ", AsAbsl(socket_name), " could not be parsed"));
  }
  if (!status.ok()) passed->clear();
  return status;
}

absl::Status ReceiveDatagram(int socket, google::protobuf::MessageLite* message, size_t max_bytes,
                             int* passed_fd, std::string_view socket_name) {
  std::vector<UniqueFd> passed;
  absl::Status status = ReceiveDatagram(socket, message, max_bytes, 1, &passed, socket_name);
  *passed_fd = passed.empty() ? -1 : passed.front().Release();
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
