#include "cache_server/connection_threads.h"

#include <sys/socket.h>
#include <unistd.h>

namespace granary {

bool ConnectionThreads::Run(int fd, std::function<void(int fd)> serve) {
  MutexLock lock(&mutex_);
  ReapLocked();
  if (stopping_ || connections_.size() >= max_connections_) {
    ::close(fd);
    return false;
  }
  Connection& served = connections_.emplace_back();
  served.fd = fd;
  served.thread = std::thread([this, &served, serve = std::move(serve)] {
    serve(served.fd);
    MutexLock lock(&mutex_);
    ::close(served.fd);
    served.done = true;
  });
  return true;
}

void ConnectionThreads::Shutdown() {
  std::list<Connection> connections;
  {
    MutexLock lock(&mutex_);
    stopping_ = true;
    for (Connection& connection : connections_) {
      if (!connection.done) ::shutdown(connection.fd, SHUT_RDWR);
    }
    connections.swap(connections_);
  }
  for (Connection& connection : connections) connection.thread.join();
}

bool ConnectionThreads::stopping() const {
  MutexLock lock(&mutex_);
  return stopping_;
}

void ConnectionThreads::ReapLocked() {
  for (auto it = connections_.begin(); it != connections_.end();) {
    if (it->done) {
      it->thread.join();
      it = connections_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace granary
