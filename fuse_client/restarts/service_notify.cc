#include "fuse_client/restarts/service_notify.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/base/logging.h"
#include "common/base/unique_fd.h"

namespace granary::fuse {

void NotifyServiceManagerReady() {
  const char* socket_path = std::getenv("NOTIFY_SOCKET");
  if (socket_path == nullptr || socket_path[0] == '\0') return;
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  const size_t length = std::strlen(socket_path);
  if (length >= sizeof(address.sun_path)) return;
  std::memcpy(address.sun_path, socket_path, length);
  if (address.sun_path[0] == '@') address.sun_path[0] = '\0';  // An abstract socket.
  UniqueFd socket(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  const std::string state = absl::StrCat("READY=1\nMAINPID=", ::getpid(), "\n");
  if (!socket.valid() ||
      ::sendto(socket.get(), state.data(), state.size(), MSG_NOSIGNAL,
               reinterpret_cast<const sockaddr*>(&address),
               static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + length)) < 0) {
    GRANARY_LOG(WARNING) << "cannot notify the service manager at " << socket_path << ": "
                         << std::strerror(errno);
  }
}

}  // namespace granary::fuse
