// LocalReadServer answers the local read path (common/local_read_socket.h)
// on a SOCK_SEQPACKET Unix socket: for each LocalReadRequest, the chunk's
// location and a read-only descriptor of its segment, or the error (NOT_FOUND
// on a miss: misses are read through over gRPC, not here). One thread
// accepts; each connection gets a thread that answers its requests in turn,
// since a reader keeps its connections and sends one request at a time on
// each. Connections beyond kMaxConnections are closed at once, and a client
// that sends garbage gets an error answer and stays connected.
//
// Who may connect is the socket file's owner, group and mode, set by the
// caller exactly as for the gRPC socket: a descriptor of a segment gives no
// more than the gRPC socket already does (every cached chunk).
//
// Thread-safety: Shutdown() (or the destructor) from one thread.
#ifndef GRANARY_CACHE_SERVER_LOCAL_READ_SERVER_H_
#define GRANARY_CACHE_SERVER_LOCAL_READ_SERVER_H_

#include <atomic>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "cache_server/read_through.h"

namespace granary {

class LocalReadServer {
 public:
  static constexpr int kMaxConnections = 256;

  // Listens on `path`, replacing a stale socket file there; `reads` must
  // outlive the server.
  static absl::StatusOr<std::unique_ptr<LocalReadServer>> Start(const std::string& path,
                                                                ReadThrough* reads);
  ~LocalReadServer();
  LocalReadServer(const LocalReadServer&) = delete;
  LocalReadServer& operator=(const LocalReadServer&) = delete;

  // Stops accepting, closes every connection and waits for their threads.
  void Shutdown();

 private:
  LocalReadServer(int listen_fd, ReadThrough* reads) : listen_fd_(listen_fd), reads_(reads) {}

  struct Connection {
    int fd = -1;
    std::thread thread;
    bool done = false;  // Guarded by mutex_; its thread has closed fd and may be joined.
  };

  void Accept();
  void Serve(Connection* connection);
  // Joins the threads of connections that have closed.
  void ReapLocked();

  const int listen_fd_;
  ReadThrough* const reads_;
  std::atomic<bool> stopping_{false};
  std::mutex mutex_;
  std::list<Connection> connections_;  // Guarded by mutex_.
  std::thread acceptor_;
};

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_LOCAL_READ_SERVER_H_
