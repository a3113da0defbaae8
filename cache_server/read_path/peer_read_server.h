// PeerReadServer answers the peer read protocol (client/peer_read_protocol.h):
// chunk reads from other Granary nodes and remote readers, each one request
// and one answer on a kept TCP connection instead of a gRPC call. The
// connections come from granaryd's TCP port, where the ConnectionAcceptor
// admitted them (connection limits, ConnectionTable) and found them starting
// with the protocol's magic.
//
// A connection must present the cluster token in its hello within
// kHelloTimeout (constant-time compared); a wrong or missing token is
// answered UNAUTHENTICATED and the connection closed, logged at most once per
// 10 s. With no token configured (granaryd's --insecure-tcp) every TCP caller
// is a member, as for gRPC. Members read as they do over gRPC's ReadChunk:
// the chunk through ReadThrough, with no per-file permission check (that is
// for local callers; common/cluster_token.h). A malformed request is
// answered INVALID_ARGUMENT and the connection stays usable unless its
// framing was lost; a connection idle for kIdleTimeout, or whose reader
// takes no bytes for kSendTimeout, is closed. Connections beyond
// kMaxConnections are closed at once.
//
// Thread-safety: Serve() from the acceptor's thread; Shutdown() (or the
// destructor) once, after the acceptor has stopped.
#ifndef GRANARY_CACHE_SERVER_READ_PATH_PEER_READ_SERVER_H_
#define GRANARY_CACHE_SERVER_READ_PATH_PEER_READ_SERVER_H_

#include <chrono>
#include <string>

#include "absl/status/status.h"
#include "cache_server/connection_threads.h"
#include "cache_server/metrics.h"
#include "cache_server/read_path/read_through.h"

namespace granary {

class PeerReadServer {
 public:
  static constexpr size_t kMaxConnections = 256;
  static constexpr std::chrono::seconds kHelloTimeout{5};
  static constexpr std::chrono::seconds kIdleTimeout{300};
  static constexpr std::chrono::seconds kSendTimeout{30};
  // The largest piece of a range read in one go (ReadThrough::Serve).
  static constexpr uint32_t kPieceBytes = 1 << 20;

  // `reads` and `metrics` must outlive the server.
  PeerReadServer(std::string cluster_token, ReadThrough* reads, ServerMetrics* metrics)
      : cluster_token_(std::move(cluster_token)), reads_(reads), metrics_(metrics) {}
  ~PeerReadServer() { Shutdown(); }
  PeerReadServer(const PeerReadServer&) = delete;
  PeerReadServer& operator=(const PeerReadServer&) = delete;

  // Serves connection `fd` from `peer_address` ("ipv4:HOST:PORT") on a
  // thread of its own, which closes it.
  void Serve(int fd, std::string peer_address);

  // Closes every connection and waits for their threads.
  void Shutdown() { connections_.Shutdown(); }

 private:
  void ServeConnection(int fd, const std::string& peer_address);
  // Reads the hello and answers it: whether the connection may read.
  bool Welcome(int fd, const std::string& peer_address);
  // Answers one request; false when the connection must close.
  bool Answer(int fd, const std::string& peer_address);

  const std::string cluster_token_;
  ReadThrough* const reads_;
  ServerMetrics* const metrics_;
  ConnectionThreads connections_{kMaxConnections};
};

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_READ_PATH_PEER_READ_SERVER_H_
