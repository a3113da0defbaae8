// LocalReadServer answers the local read path (common/net/local_read_socket.h)
// on a SOCK_SEQPACKET Unix socket: for each LocalReadRequest, the chunk's
// location and a read-only descriptor of its data file (or, for a whole-file
// request, the descriptor of the file held whole and verified, with the ctime
// it was verified at, or of an in-memory copy of it when the request allows
// one and the store lacks the file, followed by those of the files asked for
// ahead that the store holds whole and verified), or the error (NOT_FOUND
// on a miss: misses are read through over gRPC, not here); for a use
// report, the files withdrawn since the reader's last report. One thread
// accepts; each connection gets a thread that answers its requests in turn,
// since a reader keeps its connections and sends one request at a time on
// each. Connections beyond kMaxConnections are closed at once, and a client
// that sends garbage gets an error answer and stays connected. A user other
// than root and granaryd's own keeps at most kMaxConnectionsPerUser of them,
// so that no user takes the connections granary-fuse and others read with;
// and an answer that hands over descriptors waits until the client has read
// the answer before (kAnswerReadTimeout at most, then the connection is
// closed), so that a client that sends requests and never reads cannot make
// granaryd keep more than one answer's descriptors in flight on a connection.
//
// A descriptor of a data file reads every chunk in it, whichever chunk it
// was asked for, and granary-fuse checks permissions itself (as the kernel's
// default_permissions), so only callers whose SO_PEERCRED uid is 0 or
// granaryd's own euid are answered chunk, whole-file and use requests; any
// other caller gets PERMISSION_DENIED on those and reads over gRPC, which
// checks file permissions. Batches of whole files (BatchReads) are answered
// to every caller, each file checked against the caller's credentials. The socket file gets its
// group and mode (as the gRPC socket's) before it listens. Accept errors that mean a resource ran
// short back off and retry; the listener never stops. A request's read_bytes counts as served up to
// the chunk's length, no more.
//
// Jobs: a batch is counted in `jobs` for the caller's job (its SO_PEERCRED pid's cgroup,
// common/jobs/job_identity.h): its files opened, their bytes (a file read
// through for the batch as from the source, one handed from the store as
// local) and the batch's time as one read of its slowest origin.
//
// Thread-safety: Shutdown() (or the destructor) from one thread.
#ifndef GRANARY_CACHE_SERVER_READ_PATH_LOCAL_READ_SERVER_H_
#define GRANARY_CACHE_SERVER_READ_PATH_LOCAL_READ_SERVER_H_

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "cache_server/access/caller.h"
#include "cache_server/access/connection_budget.h"
#include "cache_server/connection_threads.h"
#include "cache_server/read_path/batch_reads.h"
#include "cache_server/read_path/read_through.h"
#include "common/base/unique_fd.h"
#include "common/jobs/job_identity.h"
#include "common/jobs/job_reads.h"

namespace granary {

class LocalReadServer {
 public:
  static constexpr uint32_t kMaxConnections = 256;
  static constexpr uint32_t kMaxConnectionsPerUser = 16;
  static constexpr std::chrono::seconds kAnswerReadTimeout{10};

  // Listens on `path` with permission bits `mode` and group `gid`,
  // replacing a stale socket file there; `reads`, `batches` and `jobs` must
  // outlive the server.
  static absl::StatusOr<std::unique_ptr<LocalReadServer>> Start(const std::string& path,
                                                                uint32_t mode, gid_t gid,
                                                                ReadThrough* reads,
                                                                BatchReads* batches,
                                                                JobLedger* jobs);
  ~LocalReadServer();
  LocalReadServer(const LocalReadServer&) = delete;
  LocalReadServer& operator=(const LocalReadServer&) = delete;

  // Stops accepting, closes every connection and waits for their threads.
  void Shutdown();

 private:
  LocalReadServer(int listen_fd, ReadThrough* reads, BatchReads* batches, JobLedger* jobs)
      : listen_fd_(listen_fd), reads_(reads), batches_(batches), jobs_(jobs) {}

  void Accept();
  // Answers the requests of `caller` on `connection` in turn until it closes.
  void Serve(int connection, const Caller& caller);
  // The answer to one request (`received` says whether it was read whole)
  // of `caller`; `*passed` gets the descriptors to pass with it.
  v1::LocalReadResponse Answer(const absl::Status& received, const v1::LocalReadRequest& request,
                               const Caller& caller, std::vector<UniqueFd>* passed);
  // Counts the batch `answer` answered for `caller` in `wait_ns`.
  void CountBatch(const Caller& caller, const v1::BatchRequest& request,
                  const v1::BatchAnswer& answer, int64_t wait_ns);

  const int listen_fd_;
  ReadThrough* const reads_;
  BatchReads* const batches_;
  JobLedger* const jobs_;
  JobIdentifier job_identifier_;
  std::atomic<bool> stopping_{false};
  ConnectionThreads connections_{kMaxConnections};
  // Connections of users other than root and granaryd's own, by uid.
  ConnectionBudget user_connections_{
      "local read connections",
      {.per_host = kMaxConnectionsPerUser, .overall = kMaxConnections},
      "kMaxConnectionsPerUser",
      "kMaxConnections"};
  std::thread acceptor_;
};

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_READ_PATH_LOCAL_READ_SERVER_H_
