#include "cache_server/read_path/peer_read_server.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>

#include "absl/strings/str_cat.h"
#include "client/dataset_client.h"
#include "client/peer_read_protocol.h"
#include "common/base/logging.h"
#include "common/net/cluster_token.h"

namespace granary {
namespace {

// Refusals of a kind are logged at most this often.
constexpr std::chrono::seconds kRefusalLogPeriod{10};

// Counts refusals of one kind and says when one is to be logged: at most once
// per kRefusalLogPeriod, so that a flood of connections cannot flood the log.
class RefusalLog {
 public:
  // Counts a refusal. True when it is to be logged now, with `*refused` the
  // refusals since the last one logged, this one included.
  bool Count(uint64_t* refused) {
    unlogged_.fetch_add(1, std::memory_order_relaxed);
    const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                            std::chrono::steady_clock::now().time_since_epoch())
                            .count();
    int64_t last = last_ns_.load(std::memory_order_relaxed);
    if (now - last < std::chrono::nanoseconds(kRefusalLogPeriod).count() ||
        !last_ns_.compare_exchange_strong(last, now, std::memory_order_relaxed)) {
      return false;
    }
    *refused = unlogged_.exchange(0, std::memory_order_relaxed);
    return true;
  }

 private:
  std::atomic<int64_t> last_ns_{0};
  std::atomic<uint64_t> unlogged_{0};
};

void SetTimeout(int fd, int option, std::chrono::seconds timeout) {
  const timeval limit{static_cast<time_t>(timeout.count()), 0};
  ::setsockopt(fd, SOL_SOCKET, option, &limit, sizeof(limit));
}

absl::Status SendAnswer(int fd, const absl::Status& status, std::string_view what) {
  const std::string answer = EncodePeerReadAnswer(status, false, 0);
  const std::string_view parts[] = {answer};
  return SendAll(fd, parts, what);
}

// Sends the answer's header with the range's first piece, then the rest.
class AnswerSink : public ReadThrough::RangeSink {
 public:
  AnswerSink(int fd, std::string_view what) : fd_(fd), what_(what) {}

  bool Begin(uint64_t length, bool from_cache) override {
    header_ = EncodePeerReadAnswer(absl::OkStatus(), from_cache, static_cast<uint32_t>(length));
    return true;
  }
  bool Write(std::string_view piece) override {
    const std::string_view parts[] = {header_, piece};
    const bool sent = SendAll(fd_, parts, what_).ok();
    header_.clear();
    begun_ = true;
    return sent;
  }
  // Whether the answer's header went out: an error now cannot be answered.
  bool begun() const { return begun_ || !header_.empty(); }

 private:
  const int fd_;
  const std::string_view what_;
  std::string header_;
  bool begun_ = false;
};

}  // namespace

PeerReadServer::PeerReadServer(std::string cluster_token, Limits limits, ReadThrough* reads,
                               ServerMetrics* metrics)
    : cluster_token_(std::move(cluster_token)),
      reads_(reads),
      metrics_(metrics),
      unauthenticated_("peer read connections not yet authenticated",
                       {limits.unauthenticated_per_host, limits.unauthenticated},
                       "max_unauthenticated_connections_per_host",
                       "max_unauthenticated_connections"),
      authenticated_("authenticated peer read connections", {kMaxConnections, kMaxConnections},
                     "PeerReadServer::kMaxConnections", "PeerReadServer::kMaxConnections"),
      connections_(size_t{limits.unauthenticated} + kMaxConnections) {}

void PeerReadServer::Serve(int fd, std::string peer_address) {
  const auto hello_deadline = std::chrono::steady_clock::now() + kHelloTimeout;
  absl::StatusOr<ConnectionBudget::Slot> unauthenticated =
      unauthenticated_.Take(HostOf(peer_address));
  if (!unauthenticated.ok()) {
    ::close(fd);
    static RefusalLog over_budget;
    if (uint64_t closed = 0; over_budget.Count(&closed)) {
      GRANARY_LOG(WARNING) << "peer reads: closed " << closed
                           << " new connection(s) at once since the last such line: "
                           << unauthenticated.status().message();
    }
    return;
  }
  // std::function needs a copyable callable, which the slot is not; the
  // connection's thread moves it out, to give it back after the hello.
  auto slot = std::make_shared<ConnectionBudget::Slot>(*std::move(unauthenticated));
  if (!connections_.Run(fd,
                        [this, peer_address = std::move(peer_address), slot = std::move(slot),
                         hello_deadline](int served) mutable {
                          ServeConnection(served, peer_address, std::move(slot), hello_deadline);
                        }) &&
      !connections_.stopping()) {
    GRANARY_LOG_FIRST_N(WARNING, 5)
        << "peer reads: over " << size_t{kMaxConnections} + unauthenticated_.held()
        << " connections; closed a new one";
  }
}

void PeerReadServer::ServeConnection(int fd, const std::string& peer_address,
                                     std::shared_ptr<ConnectionBudget::Slot> unauthenticated,
                                     std::chrono::steady_clock::time_point hello_deadline) {
  const int flags = ::fcntl(fd, F_GETFL);
  ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  SetTimeout(fd, SO_SNDTIMEO, kSendTimeout);
  std::optional<ConnectionBudget::Slot> authenticated = Welcome(fd, peer_address, hello_deadline);
  unauthenticated.reset();
  if (!authenticated) return;
  SetTimeout(fd, SO_RCVTIMEO, kIdleTimeout);
  while (Answer(fd, peer_address)) {
  }
}

std::optional<ConnectionBudget::Slot> PeerReadServer::Welcome(
    int fd, const std::string& peer_address, std::chrono::steady_clock::time_point deadline) {
  const std::string what = absl::StrCat("peer read hello from ", peer_address);
  char header[kPeerReadHelloHeaderBytes];
  if (!ReceiveExactlyBefore(fd, header, deadline, what).ok()) return std::nullopt;
  absl::StatusOr<PeerReadHello> hello = DecodePeerReadHello(header);
  std::string token;
  absl::Status welcome = hello.status();
  std::optional<ConnectionBudget::Slot> authenticated;
  if (hello.ok()) {
    token.resize(hello->token_bytes);
    if (!ReceiveExactlyBefore(fd, token, deadline, what).ok()) return std::nullopt;
    if (!cluster_token_.empty() && !TokensMatch(token, cluster_token_)) {
      welcome = absl::UnauthenticatedError(absl::StrCat(
          token.empty() ? "no cluster token" : "wrong cluster token", " from ", peer_address,
          ": this granaryd requires the cluster token on TCP connections "
          "(--token-file or $GRANARY_TOKEN_FILE)"));
    } else if (absl::StatusOr<ConnectionBudget::Slot> slot =
                   authenticated_.Take(HostOf(peer_address));
               slot.ok()) {
      authenticated.emplace(*std::move(slot));
    } else {
      welcome = absl::Status(slot.status().code(),
                             absl::StrCat(slot.status().message(), "; read over gRPC"));
    }
  }
  static RefusalLog refused;
  if (uint64_t count = 0; !welcome.ok() && refused.Count(&count)) {
    GRANARY_LOG(WARNING) << "refused " << count
                         << " peer read connection(s) since the last such line: "
                         << welcome.message();
  }
  const std::string answer = EncodePeerReadAnswer(welcome, false, 0);
  const std::string_view parts[] = {std::string_view(kPeerReadMagic, sizeof(kPeerReadMagic)),
                                    answer};
  if (!SendAll(fd, parts, what).ok()) return std::nullopt;
  return authenticated;
}

bool PeerReadServer::Answer(int fd, const std::string& peer_address) {
  const std::string what = absl::StrCat("peer read from ", peer_address);
  char length_bytes[4];
  if (!ReceiveExactly(fd, length_bytes, what).ok()) return false;
  const uint32_t length = DecodePeerReadRequestLength(length_bytes);
  if (length > kMaxPeerReadRequestBytes) {
    metrics_->read_errors.fetch_add(1, std::memory_order_relaxed);
    (void)SendAnswer(fd,
                     absl::InvalidArgumentError(
                         absl::StrCat("a peer read request of ", length, " bytes is over ",
                                      kMaxPeerReadRequestBytes, "; closing the connection")),
                     what);
    return false;
  }
  std::string body(length, '\0');
  if (!ReceiveExactly(fd, body, what).ok()) return false;
  v1::ReadChunkRequest request;
  absl::Status read;
  AnswerSink sink(fd, what);
  if (!request.ParseFromString(body)) {
    read = absl::InvalidArgumentError("a peer read request that is not a ReadChunkRequest");
  } else if (!request.has_key()) {
    read = absl::InvalidArgumentError("read request names no chunk key");
  } else {
    read = reads_->Serve(ChunkKey::FromProto(request.key()), request.offset(), request.length(),
                         SourcingOf(request), kPieceBytes, sink);
  }
  if (read.ok()) return true;
  metrics_->read_errors.fetch_add(1, std::memory_order_relaxed);
  if (sink.begun()) return false;
  return SendAnswer(fd, read, what).ok();
}

}  // namespace granary
