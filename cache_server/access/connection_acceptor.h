// ConnectionAcceptor accepts every connection to granaryd's gRPC service
// itself, on the Unix socket and the TCP listener alike, so that each one is
// known before a call arrives on it: it records the connection's caller in a
// ConnectionTable (SO_PEERCRED and SO_PEERGROUPS of a local process, the
// address of a remote one), enforces the table's limits (a connection over
// one is closed at once), and only then hands the descriptor to gRPC
// (grpc::AddInsecureChannelFromFd), which names the peer "fd:N".
//
// One thread polls every listener. Accept errors that mean a resource ran
// short back off and retry (listening_socket.h); the listener never stops.
// Every second the table forgets the connections gRPC has closed.
//
// Thread-safety: Shutdown() (or the destructor) from one thread.
#ifndef GRANARY_CACHE_SERVER_ACCESS_CONNECTION_ACCEPTOR_H_
#define GRANARY_CACHE_SERVER_ACCESS_CONNECTION_ACCEPTOR_H_

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "cache_server/access/caller.h"
#include "cache_server/access/connection_table.h"
#include "grpcpp/server.h"

namespace granary {

class ConnectionAcceptor {
 public:
  struct Listener {
    int fd = -1;  // Listening; the acceptor closes it.
    Caller::Channel channel = Caller::Channel::kUnixSocket;
  };

  // Starts accepting on `listeners` for `server` (started, with no listening
  // ports of its own), recording callers in `table`; both must outlive the
  // acceptor.
  static absl::StatusOr<std::unique_ptr<ConnectionAcceptor>> Start(std::vector<Listener> listeners,
                                                                   ConnectionTable* table,
                                                                   grpc::Server* server);
  ~ConnectionAcceptor();
  ConnectionAcceptor(const ConnectionAcceptor&) = delete;
  ConnectionAcceptor& operator=(const ConnectionAcceptor&) = delete;

  // Stops accepting and closes the listeners; connections gRPC holds stay.
  void Shutdown();

 private:
  ConnectionAcceptor(std::vector<Listener> listeners, ConnectionTable* table, grpc::Server* server,
                     int wake_fd)
      : listeners_(std::move(listeners)), table_(table), server_(server), wake_fd_(wake_fd) {}

  void Run();

  const std::vector<Listener> listeners_;
  ConnectionTable* const table_;
  grpc::Server* const server_;
  const int wake_fd_;  // An eventfd that Shutdown() signals.
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_ACCESS_CONNECTION_ACCEPTOR_H_
