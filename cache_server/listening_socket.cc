#include "cache_server/listening_socket.h"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/base/absl_compat.h"
#include "common/base/logging.h"
#include "common/base/status.h"
#include "common/net/server_address.h"

namespace granary {

absl::StatusOr<int> ListenOnUnixSocket(const std::string& path, int type, uint32_t mode,
                                       gid_t gid) {
  GRANARY_ASSIGN_OR_RETURN(sockaddr_un address, UnixSocketAddress(path));
  ::unlink(path.c_str());
  int fd = ::socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoStatus(errno, absl::StrCat("creating socket ", path));
  auto fail = [&](const std::string& what) {
    int error = errno;
    ::close(fd);
    return ErrnoStatus(error, absl::StrCat(what, " socket ", path));
  };
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    return fail("cannot bind");
  }
  if (::chown(path.c_str(), static_cast<uid_t>(-1), gid) != 0) {
    return fail(absl::StrCat("cannot give group ", gid, " the"));
  }
  if (::chmod(path.c_str(), static_cast<mode_t>(mode)) != 0) return fail("cannot set the mode of");
  if (::listen(fd, SOMAXCONN) != 0) return fail("cannot listen on");
  return fd;
}

absl::StatusOr<int> ListenOnTcp(std::string_view host_port) {
  size_t colon = host_port.rfind(':');
  if (colon == std::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat("'", AsAbsl(host_port), "' is not HOST:PORT"));
  }
  std::string host(host_port.substr(0, colon));
  std::string port(host_port.substr(colon + 1));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (int error =
          ::getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &found);
      error != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot resolve ", AsAbsl(host_port), ": ", ::gai_strerror(error)));
  }
  int fd = ::socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  bool listening = fd >= 0 && ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == 0 &&
                   ::bind(fd, found->ai_addr, found->ai_addrlen) == 0 &&
                   ::listen(fd, SOMAXCONN) == 0;
  int error = errno;
  ::freeaddrinfo(found);
  if (!listening) {
    if (fd >= 0) ::close(fd);
    return ErrnoStatus(error, absl::StrCat("cannot listen on ", AsAbsl(host_port)));
  }
  return fd;
}

bool IsResourceShortage(int error) {
  return error == EMFILE || error == ENFILE || error == ENOBUFS || error == ENOMEM;
}

void AcceptBackoff::Wait(int error) {
  ++failures_since_log_;
  auto now = std::chrono::steady_clock::now();
  if (now - last_logged_ >= std::chrono::seconds(10)) {
    GRANARY_LOG(WARNING) << listener_ << ": accept failed " << failures_since_log_ << " times ("
                         << std::strerror(error) << "); retrying after " << delay_.count() << " ms";
    last_logged_ = now;
    failures_since_log_ = 0;
  }
  std::this_thread::sleep_for(delay_);
  delay_ = std::min(delay_ * 2, kMaxDelay);
}

}  // namespace granary
