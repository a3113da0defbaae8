#include "cache_server/read_path/local_read_server.h"

#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "cache_server/access/access_policy.h"
#include "cache_server/access/peer_credentials.h"
#include "cache_server/listening_socket.h"
#include "common/base/logging.h"
#include "common/base/status.h"
#include "common/net/datagram_socket.h"
#include "common/net/local_read_socket.h"
#include "common/net/server_address.h"

namespace granary {

absl::StatusOr<std::unique_ptr<LocalReadServer>> LocalReadServer::Start(const std::string& path,
                                                                        uint32_t mode, gid_t gid,
                                                                        ReadThrough* reads,
                                                                        BatchReads* batches,
                                                                        JobLedger* jobs) {
  GRANARY_ASSIGN_OR_RETURN(int fd, ListenOnUnixSocket(path, SOCK_SEQPACKET, mode, gid));
  std::unique_ptr<LocalReadServer> server(new LocalReadServer(fd, reads, batches, jobs));
  server->acceptor_ = std::thread([raw = server.get()] { raw->Accept(); });
  return server;
}

LocalReadServer::~LocalReadServer() { Shutdown(); }

void LocalReadServer::Shutdown() {
  if (stopping_.exchange(true)) return;
  // shutdown() wakes the threads blocked in accept() and recvmsg().
  ::shutdown(listen_fd_, SHUT_RDWR);
  acceptor_.join();
  ::close(listen_fd_);
  connections_.Shutdown();
}

void LocalReadServer::Accept() {
  AcceptBackoff backoff("local read socket");
  while (!stopping_) {
    int connection = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (connection < 0) {
      if (stopping_) return;
      if (IsResourceShortage(errno)) {
        backoff.Wait(errno);
      } else if (errno != EINTR && errno != ECONNABORTED) {
        GRANARY_LOG_FIRST_N(ERROR, 5) << "local read socket: accept failed: " << errno;
      }
      continue;
    }
    backoff.Reset();
    absl::StatusOr<Caller> caller = UnixSocketCaller(connection);
    if (!caller.ok()) {
      GRANARY_LOG_FIRST_N(WARNING, 5)
          << "local read socket: closed a connection of unknown credentials: " << caller.status();
      ::close(connection);
      continue;
    }
    const uid_t uid = caller->credentials.uid;
    std::shared_ptr<ConnectionBudget::Slot> slot;
    if (uid != 0 && uid != ::geteuid()) {
      absl::StatusOr<ConnectionBudget::Slot> taken =
          user_connections_.Take(absl::StrCat("uid ", uid));
      if (!taken.ok()) {
        GRANARY_LOG_FIRST_N(WARNING, 5)
            << "local read socket: closed a new connection: " << taken.status().message();
        ::close(connection);
        continue;
      }
      slot = std::make_shared<ConnectionBudget::Slot>(*std::move(taken));
    }
    if (!connections_.Run(connection, [this, slot, caller = std::move(*caller)](
                                          int served) { Serve(served, caller); }) &&
        !stopping_) {
      GRANARY_LOG_FIRST_N(WARNING, 5)
          << "local read socket: over " << kMaxConnections << " connections; closed a new one";
    }
  }
}

namespace {

// Whether the client read everything sent to it on `connection` within
// `timeout` (SIOCOUTQ: bytes sent and not yet received).
bool AnswersRead(int connection, std::chrono::steady_clock::duration timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int unread = 0;
    if (::ioctl(connection, SIOCOUTQ, &unread) != 0) return false;
    if (unread == 0) return true;
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace

void LocalReadServer::Serve(int connection, const Caller& caller) {
  for (;;) {
    v1::LocalReadRequest request;
    std::vector<UniqueFd> ignored;
    absl::Status received = ReceiveLocalReadMessage(connection, &request, &ignored);
    ignored.clear();
    if (absl::IsUnavailable(received) || (!received.ok() && stopping_)) break;
    std::vector<UniqueFd> passed;
    v1::LocalReadResponse response = Answer(received, request, caller, &passed);
    std::vector<int> passed_fds;
    for (const UniqueFd& fd : passed) passed_fds.push_back(fd.get());
    if (!passed_fds.empty() && !AnswersRead(connection, kAnswerReadTimeout)) {
      GRANARY_LOG_FIRST_N(WARNING, 5) << "local read socket: " << DescribeCaller(caller)
                                      << " left an answer unread; closed its connection";
      break;
    }
    absl::Status sent = SendLocalReadMessage(connection, response, passed_fds);
    if (!sent.ok()) break;
  }
}

v1::LocalReadResponse LocalReadServer::Answer(const absl::Status& received,
                                              const v1::LocalReadRequest& request,
                                              const Caller& caller, std::vector<UniqueFd>* passed) {
  v1::LocalReadResponse response;
  absl::Status answer = received;
  const bool trusted = caller.credentials.uid == 0 || caller.credentials.uid == ::geteuid();
  if (answer.ok() && request.has_batch()) {
    const auto started = std::chrono::steady_clock::now();
    answer = batches_->Answer(caller, request.batch(), response.mutable_batch(), passed);
    CountBatch(caller, request.batch(), response.batch(),
               std::chrono::duration_cast<std::chrono::nanoseconds>(
                   std::chrono::steady_clock::now() - started)
                   .count());
  } else if (answer.ok() && !trusted) {
    answer = absl::PermissionDeniedError(
        "the local read socket hands out cache files, so it answers only root and "
        "granaryd's own user; read over gRPC instead, which checks the file's permissions");
  } else if (answer.ok() && request.has_uses()) {
    const store::ChunkStore::Withdrawn withdrawn = reads_->RecordUses(request.uses());
    v1::WithdrawnFiles* listed = response.mutable_withdrawn();
    for (const auto& [version, file_id] : withdrawn.files) {
      v1::FileRef* file = listed->add_files();
      file->set_dataset_version(version);
      file->set_file_id(file_id);
    }
    listed->set_withdrawn_through(withdrawn.through);
    listed->set_complete(withdrawn.complete);
  } else if (answer.ok() && !request.has_key()) {
    answer = absl::InvalidArgumentError("local read request names no chunk key");
  } else if (answer.ok() && request.whole_file().ahead_size() > static_cast<int>(kMaxAheadFiles)) {
    answer = absl::InvalidArgumentError(absl::StrCat("a whole-file request asks for ",
                                                     request.whole_file().ahead_size(),
                                                     " files ahead; at most ", kMaxAheadFiles));
  } else if (answer.ok() && request.has_whole_file()) {
    const v1::WholeFileRequest& whole = request.whole_file();
    const WholeFileFetch fetch = !whole.read_through()  ? WholeFileFetch::kHeldOnly
                                 : whole.in_memory_ok() ? WholeFileFetch::kReadThroughInMemory
                                                        : WholeFileFetch::kReadThrough;
    const ChunkKey key = ChunkKey::FromProto(request.key());
    absl::StatusOr<ReadThrough::WholeFile> file =
        reads_->OpenWholeFile(key, whole.size(), whole.chunk_size(), fetch);
    if (file.ok()) {
      passed->push_back(std::move(file->fd));
      v1::WholeFileAnswer* answered = response.mutable_whole_file();
      answered->set_verified_ctime_ns(file->verified_ctime_ns);
      answered->set_in_memory(file->in_memory);
      for (const v1::AheadFile& ahead : whole.ahead()) {
        absl::StatusOr<ReadThrough::WholeFile> held = reads_->OpenHeldAhead(
            {key.dataset_version, ahead.file_id(), 0}, ahead.size(), whole.chunk_size());
        if (!held.ok()) continue;
        passed->push_back(std::move(held->fd));
        v1::AheadAnswer* added = answered->add_ahead();
        added->set_file_id(ahead.file_id());
        added->set_verified_ctime_ns(held->verified_ctime_ns);
      }
    }
    answer = file.status();
  } else if (answer.ok()) {
    absl::StatusOr<store::ChunkStore::Extent> extent =
        reads_->Locate(ChunkKey::FromProto(request.key()), request.read_bytes());
    if (extent.ok()) {
      passed->push_back(std::move(extent->fd));
      *response.mutable_location() = std::move(extent->location);
    }
    answer = extent.status();
  }
  response.set_code(static_cast<int>(answer.code()));
  response.set_message(std::string(answer.message()));
  return response;
}

void LocalReadServer::CountBatch(const Caller& caller, const v1::BatchRequest& request,
                                 const v1::BatchAnswer& answer, int64_t wait_ns) {
  // A batch refused whole (an unknown dataset) is no job's read.
  if (answer.files().empty()) return;
  std::array<uint64_t, kReadOrigins> bytes{};
  bool read_any = false;
  ReadOrigin slowest = ReadOrigin::kLocal;
  std::shared_ptr<JobReadCounters> counters =
      jobs_->For(job_identifier_.JobOf(caller.credentials.pid, caller.credentials.uid),
                 request.dataset(), answer.dataset_version(), caller.credentials.uid);
  for (const v1::BatchFile& file : answer.files()) {
    if (file.code() != 0) {
      counters->Failed();
      continue;
    }
    if (file.read_by_ranges()) continue;  // Its bytes come over gRPC, not counted here.
    const ReadOrigin origin =
        file.origin() < kReadOrigins ? static_cast<ReadOrigin>(file.origin()) : ReadOrigin::kSource;
    counters->Opened(0);
    bytes[static_cast<size_t>(origin)] += file.size();
    slowest = std::max(slowest, origin);
    read_any = true;
  }
  if (!read_any) return;
  for (int origin = 0; origin < kReadOrigins; ++origin) {
    if (bytes[origin] == 0 && static_cast<ReadOrigin>(origin) != slowest) continue;
    counters->Read(static_cast<ReadOrigin>(origin), bytes[origin],
                   static_cast<ReadOrigin>(origin) == slowest ? wait_ns : 0);
  }
}

}  // namespace granary
