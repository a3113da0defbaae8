// PeerReadConnections reads chunks from one granaryd over TCP with the peer
// read protocol (peer_read_protocol.h): connections are made when a read
// needs one (with the cluster token in the hello) and kept for the next
// read. A kept connection the server has closed meanwhile (a restart, an
// idle timeout) is replaced by a new one, since a read can be asked again,
// and the other kept connections, closed by the same restart most likely,
// are dropped.
//
// A server reached but turning a new connection away before welcoming it
// (closing or resetting it, or answering RESOURCE_EXHAUSTED: its budget of
// connections not yet authenticated is full, which anyone who reaches its
// port can fill) has not refused the read: the read is left to gRPC.
//
// Thread-safety: Read() may be called concurrently; each read uses a
// connection of its own.
#ifndef GRANARY_CLIENT_PEER_READ_CONNECTIONS_H_
#define GRANARY_CLIENT_PEER_READ_CONNECTIONS_H_

#include <chrono>
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

  // What became of a read.
  enum class Outcome {
    kRead,        // `status` is the read's.
    kNotSpoken,   // The server does not speak the protocol (an older granaryd).
    kTurnedAway,  // The server turned a new connection away; `status` says how.
  };
  struct Result {
    Outcome outcome = Outcome::kRead;
    absl::Status status;
  };

  // Reads what `request` asks for into `out`, which must be exactly as long
  // as the answer. A read made (kRead) has the server's status (DATA_LOSS
  // when it sends another number of bytes), UNAVAILABLE when the server
  // cannot be reached or the connection fails, DEADLINE_EXCEEDED when it
  // does not answer within the timeout. Otherwise (kNotSpoken, kTurnedAway)
  // the caller reads over gRPC instead.
  Result Read(const v1::ReadChunkRequest& request, std::span<char> out);

 private:
  // What one exchange on a connection ended with.
  struct Exchanged {
    absl::Status status;
    bool reusable = false;  // The connection is at a request's start again.
  };
  // A new connection past the hello, or (`fd` not valid) what the read
  // comes to without one.
  struct Connected {
    UniqueFd fd;
    Result unconnected;
  };
  Connected Connect();
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
