// The peer read protocol: how chunk reads travel between Granary nodes over
// TCP without a gRPC call each. A gRPC call costs a small read several
// thread hand-offs on each side and, past HTTP/2's 64 KiB stream window, one
// more round trip; here a read is one request and one answer on a kept connection, and the
// answer's bytes land straight in the reader's buffer.
//
// It is spoken on granaryd's gRPC TCP port: the first byte of a connection
// tells the two apart (HTTP/2 starts with "PRI", this protocol with
// kPeerReadMagic). All numbers are big-endian.
//
//   hello    client: magic (4) | version (1) | token length (2) | cluster token
//            server: magic (4) | an answer with no bytes (OK, or
//            UNAUTHENTICATED and close, or RESOURCE_EXHAUSTED and close when
//            it serves as many connections as it may); a reply of other bytes
//            is a server that does not speak the protocol (gRPC sends its
//            HTTP/2 settings first; the reader then reads over gRPC), a close
//            before any byte a server going away or turning the connection
//            away (the reader then reads that chunk over gRPC)
//   request  length (4, at most kMaxPeerReadRequestBytes) | v1::ReadChunkRequest
//   answer   status code (1) | from cache (1) | message length (2) |
//            byte count (4) | message | bytes
//
// A server that cannot finish an answer's bytes closes the connection; the
// reader then sees a short answer and tries elsewhere.
//
// Thread-safety: pure functions, and blocking I/O on a descriptor the caller
// owns.
#ifndef GRANARY_CLIENT_PEER_READ_PROTOCOL_H_
#define GRANARY_CLIENT_PEER_READ_PROTOCOL_H_

#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace granary {

inline constexpr char kPeerReadMagic[4] = {'G', 'R', 'N', 'R'};
inline constexpr uint8_t kPeerReadVersion = 1;
inline constexpr size_t kMaxPeerReadTokenBytes = 1024;
inline constexpr size_t kMaxPeerReadRequestBytes = 4096;
inline constexpr size_t kPeerReadHelloHeaderBytes = 7;
inline constexpr size_t kPeerReadAnswerHeaderBytes = 8;
// An answer's message is cut to this; its bytes to what a chunk may hold.
inline constexpr size_t kMaxPeerReadMessageBytes = 1024;

// The client's hello carrying `token`.
std::string EncodePeerReadHello(std::string_view token);

// A hello's fixed part, decoded: INVALID_ARGUMENT naming what is wrong when
// the magic, the version or the token's length is not this protocol's.
struct PeerReadHello {
  uint16_t token_bytes = 0;
};
absl::StatusOr<PeerReadHello> DecodePeerReadHello(
    std::span<const char, kPeerReadHelloHeaderBytes> header);

// An answer's header followed by its message: `status` (its message cut to
// kMaxPeerReadMessageBytes), then `byte_count` bytes to follow.
std::string EncodePeerReadAnswer(const absl::Status& status, bool from_cache, uint32_t byte_count);

struct PeerReadAnswerHeader {
  absl::StatusCode code = absl::StatusCode::kUnknown;
  bool from_cache = false;
  uint16_t message_bytes = 0;
  uint32_t byte_count = 0;
};
// INVALID_ARGUMENT when the code is not one absl knows or the message is too long.
absl::StatusOr<PeerReadAnswerHeader> DecodePeerReadAnswer(
    std::span<const char, kPeerReadAnswerHeaderBytes> header);

// A request's length prefix.
void EncodePeerReadRequestLength(uint32_t length, char (&out)[4]);
uint32_t DecodePeerReadRequestLength(const char (&in)[4]);

// Writes all of `parts` to `fd` in order (MSG_NOSIGNAL). UNAVAILABLE naming
// `what` when the connection fails, DEADLINE_EXCEEDED when its send timeout
// passes.
absl::Status SendAll(int fd, std::span<const std::string_view> parts, std::string_view what);
// Fills `out` from `fd`. UNAVAILABLE when the connection fails or closes
// first (naming how many bytes came), DEADLINE_EXCEEDED when its receive
// timeout passes.
absl::Status ReceiveExactly(int fd, std::span<char> out, std::string_view what);
// The same, with DEADLINE_EXCEEDED once `deadline` passes however the bytes
// trickle in (it sets the receive timeout of `fd`).
absl::Status ReceiveExactlyBefore(int fd, std::span<char> out,
                                  std::chrono::steady_clock::time_point deadline,
                                  std::string_view what);

}  // namespace granary

#endif  // GRANARY_CLIENT_PEER_READ_PROTOCOL_H_
