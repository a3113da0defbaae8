#include "cache_server/read_path/peer_read_server.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <atomic>

#include "absl/strings/str_cat.h"
#include "client/dataset_client.h"
#include "client/peer_read_protocol.h"
#include "common/cluster_token.h"
#include "common/logging.h"

namespace granary {
namespace {

// Refused hellos are logged at most this often.
constexpr std::chrono::seconds kRefusalLogPeriod{10};

void SetTimeout(int fd, int option, std::chrono::seconds timeout) {
  const timeval limit{static_cast<time_t>(timeout.count()), 0};
  ::setsockopt(fd, SOL_SOCKET, option, &limit, sizeof(limit));
}

absl::Status SendAnswer(int fd, const absl::Status& status, std::string_view what) {
  const std::string answer = EncodePeerReadAnswer(status, false, 0);
  const std::string_view parts[] = {answer};
  return SendAll(fd, parts, what);
}

bool ShouldLogRefusal() {
  static std::atomic<int64_t> last_ns{0};
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
  int64_t last = last_ns.load(std::memory_order_relaxed);
  return now - last >= std::chrono::nanoseconds(kRefusalLogPeriod).count() &&
         last_ns.compare_exchange_strong(last, now, std::memory_order_relaxed);
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

void PeerReadServer::Serve(int fd, std::string peer_address) {
  if (!connections_.Run(fd, [this, peer_address = std::move(peer_address)](
                                int served) { ServeConnection(served, peer_address); }) &&
      !connections_.stopping()) {
    GRANARY_LOG_FIRST_N(WARNING, 5)
        << "peer reads: over " << kMaxConnections << " connections; closed a new one";
  }
}

void PeerReadServer::ServeConnection(int fd, const std::string& peer_address) {
  const int flags = ::fcntl(fd, F_GETFL);
  ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  SetTimeout(fd, SO_SNDTIMEO, kSendTimeout);
  SetTimeout(fd, SO_RCVTIMEO, kHelloTimeout);
  if (!Welcome(fd, peer_address)) return;
  SetTimeout(fd, SO_RCVTIMEO, kIdleTimeout);
  while (Answer(fd, peer_address)) {
  }
}

bool PeerReadServer::Welcome(int fd, const std::string& peer_address) {
  const std::string what = absl::StrCat("peer read hello from ", peer_address);
  char header[kPeerReadHelloHeaderBytes];
  if (!ReceiveExactly(fd, header, what).ok()) return false;
  absl::StatusOr<PeerReadHello> hello = DecodePeerReadHello(header);
  std::string token;
  absl::Status welcome = hello.status();
  if (hello.ok()) {
    token.resize(hello->token_bytes);
    if (!ReceiveExactly(fd, token, what).ok()) return false;
    if (!cluster_token_.empty() && !TokensMatch(token, cluster_token_)) {
      welcome = absl::UnauthenticatedError(absl::StrCat(
          token.empty() ? "no cluster token" : "wrong cluster token", " from ", peer_address,
          ": this granaryd requires the cluster token on TCP connections "
          "(--token-file or $GRANARY_TOKEN_FILE)"));
    }
  }
  if (!welcome.ok() && ShouldLogRefusal()) {
    GRANARY_LOG(WARNING) << "refused a peer read connection: " << welcome.message();
  }
  const std::string answer = EncodePeerReadAnswer(welcome, false, 0);
  const std::string_view parts[] = {std::string_view(kPeerReadMagic, sizeof(kPeerReadMagic)),
                                    answer};
  return SendAll(fd, parts, what).ok() && welcome.ok();
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
