// PeerReadConnections reads chunks from one granaryd over TCP with the peer
// read protocol (peer_read_protocol.h): connections are made when a read
// needs one (with the cluster token in the hello) and kept for the next
// read. A kept connection the server has closed meanwhile (a restart, an
// idle timeout) is replaced by a new one, since a read can be asked again,
// and the other kept connections, closed by the same restart most likely,
// are dropped.
//
// Thread-safety: Read() may be called concurrently; each read uses a
// connection of its own.
#ifndef GRANARY_CLIENT_PEER_READ_CONNECTIONS_H_
#define GRANARY_CLIENT_PEER_READ_CONNECTIONS_H_

#include <chrono>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/mutex.h"
#include "common/unique_fd.h"
#include "proto/granary.pb.h"

namespace granary {

class PeerReadConnections {
 public:
  // `address` is "HOST:PORT"; `timeout` bounds connecting and each wait for
  // the server to take or answer a read.
  PeerReadConnections(std::string address, std::string cluster_token,
                      std::chrono::milliseconds timeout);
  ~PeerReadConnections() = default;
  PeerReadConnections(const PeerReadConnections&) = delete;
  PeerReadConnections& operator=(const PeerReadConnections&) = delete;

  // Reads what `request` asks for into `out`, which must be exactly as long
  // as the answer: the server's status (DATA_LOSS when it sends another
  // number of bytes), UNAVAILABLE when it cannot be reached or the connection
  // fails, DEADLINE_EXCEEDED when it does not answer within the timeout.
  // Nothing (std::nullopt) when the server does not speak the protocol: the
  // caller reads over gRPC instead.
  std::optional<absl::Status> Read(const v1::ReadChunkRequest& request, std::span<char> out);

 private:
  // What one exchange on a connection ended with.
  struct Exchanged {
    absl::Status status;
    bool reusable = false;  // The connection is at a request's start again.
  };
  // A new connection, past the hello; std::nullopt as Read() says.
  std::optional<absl::StatusOr<UniqueFd>> Connect();
  Exchanged Exchange(int fd, const v1::ReadChunkRequest& request, std::span<char> out);
  // Exchange() on `fd`, which is kept for the next read if it is at a
  // request's start again.
  Exchanged ReadOn(UniqueFd fd, const v1::ReadChunkRequest& request, std::span<char> out);

  const std::string address_;
  const std::string cluster_token_;
  const std::chrono::milliseconds timeout_;
  Mutex mutex_;
  std::vector<UniqueFd> idle_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace granary

#endif  // GRANARY_CLIENT_PEER_READ_CONNECTIONS_H_
