#include "tests/support/silent_listener.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace granary::testing {

SilentListener::SilentListener(int port, Accepted accepted)
    : fd_(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)), accepted_mode_(accepted) {
  // The port was another server's a moment ago: its closed connections
  // linger, bound to it.
  const int reuse = 1;
  setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &reuse, sizeof reuse);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  listening_ =
      bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 && listen(fd_, 64) == 0;
  thread_ = std::thread([this] { AcceptUntilStopped(); });
}

SilentListener::~SilentListener() {
  stop_ = true;
  thread_.join();
  for (int connection : accepted_) close(connection);
  close(fd_);
}

void SilentListener::AcceptUntilStopped() {
  while (!stop_) {
    pollfd ready{.fd = fd_, .events = POLLIN, .revents = 0};
    if (poll(&ready, 1, 20) <= 0) continue;
    const int connection = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (connection < 0) continue;
    ++connections_;
    if (accepted_mode_ == Accepted::kClosed) {
      close(connection);
    } else {
      accepted_.push_back(connection);
    }
  }
}

}  // namespace granary::testing
