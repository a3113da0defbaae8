#include "cache_server/local_read_server.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/local_read_socket.h"
#include "common/logging.h"
#include "common/server_address.h"
#include "common/status.h"

namespace granary {

absl::StatusOr<std::unique_ptr<LocalReadServer>> LocalReadServer::Start(const std::string& path,
                                                                        ReadThrough* reads) {
  GRANARY_ASSIGN_OR_RETURN(sockaddr_un address, UnixSocketAddress(path));
  ::unlink(path.c_str());
  int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoStatus(errno, "creating the local read socket");
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      ::listen(fd, 64) != 0) {
    int error = errno;
    ::close(fd);
    return ErrnoStatus(error, absl::StrCat("cannot listen on local read socket ", path));
  }
  std::unique_ptr<LocalReadServer> server(new LocalReadServer(fd, reads));
  server->acceptor_ = std::thread([raw = server.get()] { raw->Accept(); });
  return server;
}

LocalReadServer::~LocalReadServer() { Shutdown(); }

void LocalReadServer::Shutdown() {
  if (stopping_.exchange(true)) return;
  // shutdown() wakes the threads blocked in accept() and recvmsg().
  ::shutdown(listen_fd_, SHUT_RDWR);
  acceptor_.join();
  ::close(listen_fd_);
  std::list<Connection> connections;
  {
    std::lock_guard lock(mutex_);
    for (Connection& connection : connections_) {
      if (!connection.done) ::shutdown(connection.fd, SHUT_RDWR);
    }
    connections.swap(connections_);
  }
  for (Connection& connection : connections) connection.thread.join();
}

void LocalReadServer::ReapLocked() {
  for (auto it = connections_.begin(); it != connections_.end();) {
    if (it->done) {
      it->thread.join();
      it = connections_.erase(it);
    } else {
      ++it;
    }
  }
}

void LocalReadServer::Accept() {
  while (!stopping_) {
    int connection = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (connection < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (!stopping_) GRANARY_LOG(ERROR) << "local read socket: accept failed: " << errno;
      return;
    }
    std::lock_guard lock(mutex_);
    ReapLocked();
    if (stopping_ || connections_.size() >= kMaxConnections) {
      GRANARY_LOG_FIRST_N(WARNING, 5)
          << "local read socket: over " << kMaxConnections << " connections; closing a new one";
      ::close(connection);
      continue;
    }
    Connection& served = connections_.emplace_back();
    served.fd = connection;
    served.thread = std::thread([this, &served] { Serve(&served); });
  }
}

void LocalReadServer::Serve(Connection* served) {
  const int connection = served->fd;
  for (;;) {
    v1::LocalReadRequest request;
    int ignored_fd = -1;
    absl::Status received = ReceiveLocalReadMessage(connection, &request, &ignored_fd);
    if (ignored_fd != -1) ::close(ignored_fd);
    if (absl::IsUnavailable(received) || (!received.ok() && stopping_)) break;
    v1::LocalReadResponse response;
    int segment_fd = -1;
    absl::Status answer = received;
    if (answer.ok() && !request.has_key()) {
      answer = absl::InvalidArgumentError("local read request names no chunk key");
    }
    if (answer.ok()) {
      absl::StatusOr<store::ChunkStore::Extent> extent =
          reads_->Locate(ChunkKey::FromProto(request.key()), request.read_bytes());
      if (extent.ok()) {
        segment_fd = extent->segment_fd;
        *response.mutable_location() = std::move(extent->location);
      }
      answer = extent.status();
    }
    response.set_code(static_cast<int>(answer.code()));
    response.set_message(std::string(answer.message()));
    absl::Status sent = SendLocalReadMessage(connection, response, segment_fd);
    if (segment_fd != -1) ::close(segment_fd);
    if (!sent.ok()) break;
  }
  std::lock_guard lock(mutex_);
  ::close(connection);
  served->done = true;
}

}  // namespace granary
