// ConnectionThreads serves each of a server's connections on a thread of its
// own, up to a bound: the shape of granaryd's own socket servers (the local
// read socket, the peer read protocol), whose clients keep a connection and
// send one request at a time on it. A connection's thread closes its
// descriptor when the serving function returns; threads of closed
// connections are joined as new ones arrive.
//
// Thread-safety: Run() may be called from any thread; Shutdown() (or the
// destructor) from one thread, after which Run() refuses.
#ifndef GRANARY_CACHE_SERVER_CONNECTION_THREADS_H_
#define GRANARY_CACHE_SERVER_CONNECTION_THREADS_H_

#include <cstddef>
#include <functional>
#include <list>
#include <thread>

#include "common/base/mutex.h"

namespace granary {

class ConnectionThreads {
 public:
  explicit ConnectionThreads(size_t max_connections) : max_connections_(max_connections) {}
  ~ConnectionThreads() { Shutdown(); }
  ConnectionThreads(const ConnectionThreads&) = delete;
  ConnectionThreads& operator=(const ConnectionThreads&) = delete;

  // Runs `serve(fd)` on a new thread, which closes `fd` when it returns.
  // False, with `fd` closed at once, when max_connections are being served
  // or the server is shutting down.
  bool Run(int fd, std::function<void(int fd)> serve);

  // Shuts every connection down (shutdown(2) wakes a thread blocked on it),
  // and waits for their threads.
  void Shutdown();

  bool stopping() const;

 private:
  struct Connection {
    int fd = -1;
    std::thread thread;
    bool done = false;  // Its thread has closed fd and may be joined.
  };
  // Joins the threads of connections that have closed.
  void ReapLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  const size_t max_connections_;
  mutable Mutex mutex_;
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  std::list<Connection> connections_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_CONNECTION_THREADS_H_
