#include "cache_server/access/connection_acceptor.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "cache_server/access/peer_credentials.h"
#include "cache_server/listening_socket.h"
#include "client/peer_read_protocol.h"
#include "common/base/logging.h"
#include "common/base/status.h"
#include "grpcpp/server_posix.h"

namespace granary {
namespace {

constexpr std::chrono::seconds kSweepPeriod{1};
// Refused connections are logged at most this often.
constexpr std::chrono::seconds kLogPeriod{10};

// "ipv4:10.0.0.7:51234" or "ipv6:[::1]:51234", as gRPC names TCP peers.
absl::StatusOr<std::string> RemoteAddress(int fd) {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    return ErrnoStatus(errno, "getpeername");
  }
  char text[INET6_ADDRSTRLEN] = {};
  if (address.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&address);
    ::inet_ntop(AF_INET, &v4->sin_addr, text, sizeof(text));
    return absl::StrCat("ipv4:", text, ":", ntohs(v4->sin_port));
  }
  const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&address);
  ::inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof(text));
  return absl::StrCat("ipv6:[", text, "]:", ntohs(v6->sin6_port));
}

absl::StatusOr<Caller> CallerOn(int fd, Caller::Channel channel) {
  if (channel == Caller::Channel::kUnixSocket) return UnixSocketCaller(fd);
  Caller caller;
  caller.channel = channel;
  GRANARY_ASSIGN_OR_RETURN(caller.address, RemoteAddress(fd));
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return caller;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ConnectionAcceptor>> ConnectionAcceptor::Start(
    std::vector<Listener> listeners, ConnectionTable* table, grpc::Server* server,
    PeerReadHandler peer_reads) {
  // Non-blocking, so that taking every waiting connection ends at EAGAIN.
  for (const Listener& listener : listeners) {
    int flags = ::fcntl(listener.fd, F_GETFL);
    if (flags < 0 || ::fcntl(listener.fd, F_SETFL, flags | O_NONBLOCK) != 0) {
      return ErrnoStatus(errno, "making a listener non-blocking");
    }
  }
  int wake_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd < 0) return ErrnoStatus(errno, "creating the acceptor's eventfd");
  std::unique_ptr<ConnectionAcceptor> acceptor(
      new ConnectionAcceptor(std::move(listeners), table, server, std::move(peer_reads), wake_fd));
  acceptor->thread_ = std::thread([raw = acceptor.get()] { raw->Run(); });
  return acceptor;
}

ConnectionAcceptor::~ConnectionAcceptor() { Shutdown(); }

void ConnectionAcceptor::Shutdown() {
  if (stopping_.exchange(true)) return;
  uint64_t one = 1;
  if (::write(wake_fd_, &one, sizeof(one)) < 0) {
    GRANARY_LOG(ERROR) << "cannot wake the connection acceptor: " << errno;
  }
  thread_.join();
  for (const Listener& listener : listeners_) ::close(listener.fd);
  for (const Undecided& connection : undecided_) ::close(connection.fd);
  ::close(wake_fd_);
}

void ConnectionAcceptor::Route(int fd, Caller caller) {
  if (peer_reads_ == nullptr || caller.channel != Caller::Channel::kTcp) {
    grpc::AddInsecureChannelFromFd(server_, fd);
    return;
  }
  undecided_.push_back(
      {fd, std::move(caller), std::chrono::steady_clock::now() + kFirstByteTimeout});
}

void ConnectionAcceptor::Decide(std::span<const pollfd> polled) {
  const auto now = std::chrono::steady_clock::now();
  std::vector<Undecided> waiting;
  for (size_t i = 0; i < undecided_.size(); ++i) {
    Undecided& connection = undecided_[i];
    const bool readable = i < polled.size() && polled[i].revents != 0;
    char first = 0;
    ssize_t peeked = readable ? ::recv(connection.fd, &first, 1, MSG_PEEK | MSG_DONTWAIT) : -1;
    if (peeked == 1 && first == kPeerReadMagic[0]) {
      peer_reads_(connection.fd, connection.caller);
    } else if (peeked == 1) {
      grpc::AddInsecureChannelFromFd(server_, connection.fd);
    } else if (peeked == 0 || (readable && errno != EAGAIN && errno != EINTR) ||
               now >= connection.deadline) {
      ::close(connection.fd);
    } else {
      waiting.push_back(std::move(connection));
    }
  }
  undecided_ = std::move(waiting);
}

void ConnectionAcceptor::Run() {
  std::vector<pollfd> polled;
  for (const Listener& listener : listeners_) polled.push_back({listener.fd, POLLIN, 0});
  polled.push_back({wake_fd_, POLLIN, 0});
  AcceptBackoff backoff("gRPC listener");
  auto next_sweep = std::chrono::steady_clock::now() + kSweepPeriod;
  std::chrono::steady_clock::time_point last_refusal_log{};
  const size_t fixed = polled.size();
  while (!stopping_) {
    polled.resize(fixed);
    for (const Undecided& connection : undecided_) polled.push_back({connection.fd, POLLIN, 0});
    int ready = ::poll(polled.data(), polled.size(),
                       static_cast<int>(std::chrono::milliseconds(kSweepPeriod).count()));
    if (ready < 0 && errno != EINTR) {
      GRANARY_LOG(ERROR) << "connection acceptor: poll failed: " << errno;
      backoff.Wait(errno);
    }
    for (size_t i = 0; ready > 0 && i < listeners_.size(); ++i) {
      if ((polled[i].revents & POLLIN) == 0) continue;
      // Several connections may wait; take them in turn, a bounded number
      // per round so that one listener cannot starve the other.
      for (int taken = 0; taken < 64 && !stopping_; ++taken) {
        int accepted = ::accept4(listeners_[i].fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (accepted < 0) {
          if (IsResourceShortage(errno)) backoff.Wait(errno);
          break;
        }
        backoff.Reset();
        absl::StatusOr<Caller> caller = CallerOn(accepted, listeners_[i].channel);
        absl::Status admitted = caller.ok() ? table_->Admit(accepted, *caller) : caller.status();
        if (!admitted.ok()) {
          if (auto now = std::chrono::steady_clock::now(); now - last_refusal_log >= kLogPeriod) {
            GRANARY_LOG(WARNING) << "refused a connection (" << table_->refused()
                                 << " so far): " << admitted.message();
            last_refusal_log = now;
          }
          ::close(accepted);
          continue;
        }
        Route(accepted, *std::move(caller));
      }
    }
    if (!undecided_.empty()) Decide(std::span<const pollfd>(polled).subspan(fixed));
    if (auto now = std::chrono::steady_clock::now(); now >= next_sweep) {
      table_->Sweep();
      next_sweep = now + kSweepPeriod;
    }
  }
}

}  // namespace granary
