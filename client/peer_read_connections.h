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
// Several reads may be sent at once on one connection (ReadMany): the server
// reads a connection's requests one after another, so their answers come
// back in order with no round trip between them.
//
// Thread-safety: Read() and ReadMany() may be called concurrently; each call
// uses a connection of its own.
#ifndef GRANARY_CLIENT_PEER_READ_CONNECTIONS_H_
#define GRANARY_CLIENT_PEER_READ_CONNECTIONS_H_

#include <chrono>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/base/mutex.h"
#include "common/base/unique_fd.h"
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

  // The most requests ReadMany() sends at once.
  static constexpr size_t kMaxPipelinedReads = 128;

  // What became of several reads sent at once: `outcome` as Read()'s for all
  // of them, and with kRead each one's status in `statuses`.
  struct Results {
    Outcome outcome = Outcome::kRead;
    absl::Status status;  // Why, when not kRead.
    std::vector<absl::Status> statuses;
  };
  // Reads what each of `requests` (at most kMaxPipelinedReads) asks for into
  // the matching `outs[i]`, every request sent at once on one connection.
  // Each read's status is as Read()'s; a connection that fails midway fails
  // the reads not yet answered with its error.
  Results ReadMany(std::span<const v1::ReadChunkRequest> requests,
                   std::span<const std::span<char>> outs);

 private:
  // What the exchanges on a connection ended with.
  struct Exchanged {
    std::vector<absl::Status> statuses;
    size_t answered = 0;    // Reads whose answers came whole.
    bool reusable = false;  // The connection is at a request's start again.
  };
  // A new connection past the hello, or (`fd` not valid) what the read
  // comes to without one.
  struct Connected {
    UniqueFd fd;
    Result unconnected;
  };
  Connected Connect();
  // Sends every request, then reads their answers in order.
  Exchanged Exchange(int fd, std::span<const v1::ReadChunkRequest> requests,
                     std::span<const std::span<char>> outs);
  // Receives one answer into `out`; `reusable` when the connection is at the
  // next answer's start.
  absl::Status ReceiveAnswer(int fd, std::span<char> out, const std::string& what, bool* reusable);
  // Exchange() on `fd`, which is kept for the next read if it is at a
  // request's start again.
  Exchanged ReadOn(UniqueFd fd, std::span<const v1::ReadChunkRequest> requests,
                   std::span<const std::span<char>> outs);

  const std::string address_;
  const std::string cluster_token_;
  const std::chrono::milliseconds timeout_;
  Mutex mutex_;
  std::vector<UniqueFd> idle_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace granary

#endif  // GRANARY_CLIENT_PEER_READ_CONNECTIONS_H_
