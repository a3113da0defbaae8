// Listening sockets for granaryd's listeners, and what an accept loop does
// when the process runs short of descriptors or memory.
//
// A Unix socket gets its group and mode between bind() and listen(): until
// listen() nobody can connect, so no client ever connects while the socket
// file's permissions are looser than configured.
//
// AcceptBackoff: accept() failing with EMFILE, ENFILE, ENOBUFS or ENOMEM says
// the process or the host is short of a resource, not that the listener is
// broken. The loop sleeps (growing from 10 ms to 1 s, reset by the next
// success) and tries again; it logs at most once per 10 s.
//
// Thread-safety: the functions are reentrant; an AcceptBackoff belongs to one
// accept loop.
#ifndef GRANARY_CACHE_SERVER_LISTENING_SOCKET_H_
#define GRANARY_CACHE_SERVER_LISTENING_SOCKET_H_

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace granary {

// A socket of `type` (SOCK_STREAM, SOCK_SEQPACKET) listening at `path`, owned
// by group `gid` with permission bits `mode`; a stale socket file is replaced.
absl::StatusOr<int> ListenOnUnixSocket(const std::string& path, int type, uint32_t mode, gid_t gid);

// A TCP socket listening on HOST:PORT.
absl::StatusOr<int> ListenOnTcp(std::string_view host_port);

// Whether accept()'s `error` means a resource ran short (retry later).
bool IsResourceShortage(int error);

class AcceptBackoff {
 public:
  explicit AcceptBackoff(std::string listener) : listener_(std::move(listener)) {}
  // After an accept() that failed with a resource shortage: logs (rate
  // limited) and sleeps.
  void Wait(int error);
  // After an accept() that succeeded.
  void Reset() { delay_ = kFirstDelay; }

 private:
  static constexpr std::chrono::milliseconds kFirstDelay{10};
  static constexpr std::chrono::milliseconds kMaxDelay{1000};
  const std::string listener_;
  std::chrono::milliseconds delay_ = kFirstDelay;
  std::chrono::steady_clock::time_point last_logged_{};
  uint64_t failures_since_log_ = 0;
};

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_LISTENING_SOCKET_H_
