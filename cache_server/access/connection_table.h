// ConnectionTable remembers who is on the other end of every connection
// granaryd accepted and handed to gRPC: the kernel's credentials of a local
// process (SO_PEERCRED, SO_PEERGROUPS) or a remote address, keyed by the
// descriptor gRPC serves the connection on (gRPC names such a peer "fd:N").
// It also holds the limits on connections overall, per local user and per
// remote host.
//
// gRPC closes a connection's descriptor without telling anyone, and the
// number is then reused. A record therefore keeps the socket's inode, and a
// record whose descriptor no longer refers to that inode is forgotten: when
// the number is accepted again, and in Sweep(), which the acceptor calls
// periodically. A connection is recorded before gRPC gets its descriptor, so
// descriptor N always maps to the connection gRPC now serves on N.
//
// Thread-safety: all methods may be called concurrently.
#ifndef GRANARY_CACHE_SERVER_ACCESS_CONNECTION_TABLE_H_
#define GRANARY_CACHE_SERVER_ACCESS_CONNECTION_TABLE_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cache_server/access/caller.h"
#include "common/base/mutex.h"

namespace granary {

struct ConnectionLimits {
  // Connections open at once, over both listeners.
  uint32_t max_connections = 4096;
  // Unix-socket connections of one uid at once.
  uint32_t max_per_local_user = 256;
  // TCP connections from one host at once.
  uint32_t max_per_remote_host = 256;
};

class ConnectionTable {
 public:
  explicit ConnectionTable(ConnectionLimits limits) : limits_(limits) {}
  ConnectionTable(const ConnectionTable&) = delete;
  ConnectionTable& operator=(const ConnectionTable&) = delete;

  // Records the connection just accepted on `fd`, whose caller is `caller`
  // (cluster_member not yet decided). RESOURCE_EXHAUSTED naming the limit
  // when it would exceed one; the caller then closes `fd`.
  absl::Status Admit(int fd, const Caller& caller);

  // The caller recorded for the connection on `fd`; NOT_FOUND when none is.
  absl::StatusOr<Caller> Find(int fd) const;

  // Forgets the records whose descriptors gRPC has closed.
  void Sweep();

  size_t open_connections() const;
  uint64_t refused() const { return refused_.load(std::memory_order_relaxed); }

 private:
  struct Record {
    ino_t inode = 0;
    Caller caller;
  };
  // The key a connection counts under for its per-user or per-host limit.
  static std::string LimitKey(const Caller& caller);
  static bool StillOpen(int fd, ino_t inode);
  void SweepLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void ForgetLocked(absl::flat_hash_map<int, Record>::iterator record)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  absl::Status CheckLimitsLocked(const Caller& caller) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  const ConnectionLimits limits_;
  mutable Mutex mutex_;
  absl::flat_hash_map<int, Record> records_ ABSL_GUARDED_BY(mutex_);
  absl::flat_hash_map<std::string, uint32_t> per_key_ ABSL_GUARDED_BY(mutex_);
  std::atomic<uint64_t> refused_{0};
};

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_ACCESS_CONNECTION_TABLE_H_
