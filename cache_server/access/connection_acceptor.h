// ConnectionAcceptor accepts every connection to granaryd's gRPC service
// itself, on the Unix socket and the TCP listener alike, so that each one is
// known before a call arrives on it: it records the connection's caller in a
// ConnectionTable (SO_PEERCRED and SO_PEERGROUPS of a local process, the
// address of a remote one), enforces the table's limits (a connection over
// one is closed at once), and only then hands the descriptor to gRPC
// (grpc::AddInsecureChannelFromFd), which names the peer "fd:N".
//
// With a handler for the peer read protocol, a TCP connection waits (up to
// kFirstByteTimeout, polled with the listeners) until its first byte shows
// which protocol it speaks: the peer read protocol's magic
// (client/peer_read_protocol.h) goes to the handler, anything else (HTTP/2
// starts with "PRI") to gRPC; a connection that closes or sends nothing in
// time is closed.
//
// One thread polls every listener. Accept errors that mean a resource ran
// short back off and retry (listening_socket.h); the listener never stops.
// Every second the table forgets the connections gRPC has closed.
//
// Thread-safety: Shutdown() (or the destructor) from one thread.
#ifndef GRANARY_CACHE_SERVER_ACCESS_CONNECTION_ACCEPTOR_H_
#define GRANARY_CACHE_SERVER_ACCESS_CONNECTION_ACCEPTOR_H_

#include <poll.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <span>
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

  // Takes a TCP connection that speaks the peer read protocol: its
  // descriptor (the handler closes it) and its caller.
  using PeerReadHandler = std::function<void(int fd, const Caller& caller)>;

  static constexpr std::chrono::seconds kFirstByteTimeout{10};

  // Starts accepting on `listeners` for `server` (started, with no listening
  // ports of its own), recording callers in `table`; both must outlive the
  // acceptor. Without `peer_reads`, every TCP connection goes to gRPC.
  static absl::StatusOr<std::unique_ptr<ConnectionAcceptor>> Start(
      std::vector<Listener> listeners, ConnectionTable* table, grpc::Server* server,
      PeerReadHandler peer_reads = nullptr);
  ~ConnectionAcceptor();
  ConnectionAcceptor(const ConnectionAcceptor&) = delete;
  ConnectionAcceptor& operator=(const ConnectionAcceptor&) = delete;

  // Stops accepting and closes the listeners; connections gRPC holds stay.
  void Shutdown();

 private:
  ConnectionAcceptor(std::vector<Listener> listeners, ConnectionTable* table, grpc::Server* server,
                     PeerReadHandler peer_reads, int wake_fd)
      : listeners_(std::move(listeners)),
        table_(table),
        server_(server),
        peer_reads_(std::move(peer_reads)),
        wake_fd_(wake_fd) {}

  // A TCP connection whose first byte has not come yet.
  struct Undecided {
    int fd = -1;
    Caller caller;
    std::chrono::steady_clock::time_point deadline;
  };

  void Run();
  // Hands an admitted connection on, or keeps it undecided.
  void Route(int fd, Caller caller);
  // Routes or closes the undecided connections `polled` says are readable
  // or past their deadline.
  void Decide(std::span<const pollfd> polled);

  const std::vector<Listener> listeners_;
  ConnectionTable* const table_;
  grpc::Server* const server_;
  const PeerReadHandler peer_reads_;
  const int wake_fd_;
  std::vector<Undecided>
      undecided_;  // The acceptor thread's own.  // An eventfd that Shutdown() signals.
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_ACCESS_CONNECTION_ACCEPTOR_H_
