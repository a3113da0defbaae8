// PeerReadServer answers the peer read protocol (client/peer_read_protocol.h):
// chunk reads from other Granary nodes and remote readers, each one request
// and one answer on a kept TCP connection instead of a gRPC call. The
// connections come from granaryd's TCP port, where the ConnectionAcceptor
// admitted them (connection limits, ConnectionTable) and found them starting
// with the protocol's magic.
//
// A connection must present the cluster token in its hello, whole within
// kHelloTimeout of its arrival (constant-time compared); a wrong or missing
// token is answered UNAUTHENTICATED and the connection closed, logged at
// most once per 10 s. With no token configured (granaryd's --insecure-tcp)
// every TCP caller is a member, as for gRPC. Members read as they do over
// gRPC's ReadChunk: the chunk through ReadThrough, with no per-file
// permission check (that is for local callers; common/net/cluster_token.h). A
// malformed request is answered INVALID_ARGUMENT and the connection stays
// usable unless its framing was lost; a connection idle for kIdleTimeout, or
// whose reader takes no bytes for kSendTimeout, is closed.
//
// Connections whose hello has not been welcomed yet have a budget of their
// own (Limits, per remote host and overall), apart from the kMaxConnections
// authenticated ones, so that whoever reaches the TCP port, token or not,
// holds at most that small share of the server's connections and threads: a
// connection over it is closed at once (logged at most once per 10 s, with
// how many were). A welcomed connection moves to the authenticated pool; when
// that is full, its hello is answered RESOURCE_EXHAUSTED and it is closed
// (the reader then reads over gRPC).
//
// Thread-safety: Serve() from the acceptor's thread; Shutdown() (or the
// destructor) once, after the acceptor has stopped.
#ifndef GRANARY_CACHE_SERVER_READ_PATH_PEER_READ_SERVER_H_
#define GRANARY_CACHE_SERVER_READ_PATH_PEER_READ_SERVER_H_

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "cache_server/access/connection_budget.h"
#include "cache_server/connection_threads.h"
#include "cache_server/metrics.h"
#include "cache_server/read_path/read_through.h"

namespace granary {

class PeerReadServer {
 public:
  struct Limits {
    // Connections not yet authenticated from one remote host, and overall
    // (config max_unauthenticated_connections_per_host and
    // max_unauthenticated_connections).
    uint32_t unauthenticated_per_host = 8;
    uint32_t unauthenticated = 32;
  };

  static constexpr uint32_t kMaxConnections = 256;
  static constexpr std::chrono::seconds kHelloTimeout{3};
  static constexpr std::chrono::seconds kIdleTimeout{300};
  static constexpr std::chrono::seconds kSendTimeout{30};
  // The largest piece of a range read in one go (ReadThrough::Serve).
  static constexpr uint32_t kPieceBytes = 1 << 20;

  // `reads` and `metrics` must outlive the server.
  PeerReadServer(std::string cluster_token, Limits limits, ReadThrough* reads,
                 ServerMetrics* metrics);
  ~PeerReadServer() { Shutdown(); }
  PeerReadServer(const PeerReadServer&) = delete;
  PeerReadServer& operator=(const PeerReadServer&) = delete;

  // Serves connection `fd` from `peer_address` ("ipv4:HOST:PORT") on a
  // thread of its own, which closes it; closes it at once when its host or
  // the server holds as many connections not yet authenticated as Limits let.
  void Serve(int fd, std::string peer_address);

  // Closes every connection and waits for their threads.
  void Shutdown() { connections_.Shutdown(); }

 private:
  void ServeConnection(int fd, const std::string& peer_address,
                       std::shared_ptr<ConnectionBudget::Slot> unauthenticated,
                       std::chrono::steady_clock::time_point hello_deadline);
  // Reads the hello before `deadline` and answers it: the connection's place
  // among the authenticated when it may read, nothing when it must close.
  std::optional<ConnectionBudget::Slot> Welcome(int fd, const std::string& peer_address,
                                                std::chrono::steady_clock::time_point deadline);
  // Answers one request; false when the connection must close.
  bool Answer(int fd, const std::string& peer_address);

  const std::string cluster_token_;
  ReadThrough* const reads_;
  ServerMetrics* const metrics_;
  ConnectionBudget unauthenticated_;
  ConnectionBudget authenticated_;
  // Room for both budgets, so that the threads never turn away a connection
  // a budget let in.
  ConnectionThreads connections_;
};

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_READ_PATH_PEER_READ_SERVER_H_
