#include "client/peer_read_connections.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "client/peer_read_protocol.h"
#include "common/base/absl_compat.h"
#include "common/base/status.h"
#include "common/jobs/read_origin.h"
#include "common/net/server_address.h"

namespace granary {
namespace {

// Connects to `address` within `timeout`, with `timeout` as the socket's send
// and receive timeouts and no Nagle delay.
absl::StatusOr<UniqueFd> ConnectForReads(const std::string& address,
                                         std::chrono::milliseconds timeout) {
  GRANARY_ASSIGN_OR_RETURN(UniqueFd connected, ConnectTcp(address, timeout));
  int one = 1;
  ::setsockopt(connected.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  const timeval limit{static_cast<time_t>(timeout.count() / 1000),
                      static_cast<suseconds_t>(timeout.count() % 1000 * 1000)};
  ::setsockopt(connected.get(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
  ::setsockopt(connected.get(), SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof(limit));
  return connected;
}

}  // namespace

PeerReadConnections::PeerReadConnections(std::string address, std::string cluster_token,
                                         std::chrono::milliseconds timeout)
    : address_(std::move(address)), cluster_token_(std::move(cluster_token)), timeout_(timeout) {}

PeerReadConnections::Connected PeerReadConnections::Connect() {
  absl::StatusOr<UniqueFd> fd = ConnectForReads(address_, timeout_);
  if (!fd.ok()) return {UniqueFd(), {Outcome::kRead, fd.status()}};
  // A server that takes no hello within the timeout is stalled, and would be
  // over gRPC too; any other failure of the hello turns the connection away.
  const auto failed = [](absl::Status status) -> Connected {
    const Outcome outcome =
        absl::IsDeadlineExceeded(status) ? Outcome::kRead : Outcome::kTurnedAway;
    return {UniqueFd(), {outcome, std::move(status)}};
  };
  const auto not_spoken = [] { return Connected{UniqueFd(), {Outcome::kNotSpoken, {}}}; };
  const std::string what = absl::StrCat("peer read hello to ", address_);
  const std::string hello = EncodePeerReadHello(cluster_token_);
  const std::string_view parts[] = {hello};
  if (absl::Status sent = SendAll(fd->get(), parts, what); !sent.ok()) return failed(sent);
  // A server that does not speak the protocol answers with HTTP/2 frames of
  // its own (gRPC sends its settings first).
  char reply[sizeof(kPeerReadMagic) + kPeerReadAnswerHeaderBytes];
  if (absl::Status received = ReceiveExactly(fd->get(), std::span(reply, 1), what);
      !received.ok()) {
    return failed(received);
  }
  if (reply[0] != kPeerReadMagic[0]) return not_spoken();
  if (absl::Status received =
          ReceiveExactly(fd->get(), std::span(reply + 1, sizeof(reply) - 1), what);
      !received.ok()) {
    return failed(received);
  }
  if (std::memcmp(reply, kPeerReadMagic, sizeof(kPeerReadMagic)) != 0) return not_spoken();
  absl::StatusOr<PeerReadAnswerHeader> header =
      DecodePeerReadAnswer(std::span<const char, kPeerReadAnswerHeaderBytes>(
          reply + sizeof(kPeerReadMagic), kPeerReadAnswerHeaderBytes));
  if (!header.ok()) return not_spoken();
  std::string message(header->message_bytes, '\0');
  if (absl::Status read = ReceiveExactly(fd->get(), message, what); !read.ok()) {
    return failed(read);
  }
  if (header->code == absl::StatusCode::kResourceExhausted) {
    return failed(absl::ResourceExhaustedError(absl::StrCat(address_, ": ", message)));
  }
  if (header->code != absl::StatusCode::kOk) {
    return {UniqueFd(),
            {Outcome::kRead, absl::Status(header->code, absl::StrCat(address_, ": ", message))}};
  }
  return {*std::move(fd), {}};
}

PeerReadConnections::Exchanged PeerReadConnections::Exchange(
    int fd, std::span<const v1::ReadChunkRequest> requests, std::span<const std::span<char>> outs) {
  const std::string what = absl::StrCat("peer read from ", address_);
  Exchanged exchanged;
  // Each request's length prefix and body, sent in one go.
  std::vector<std::string> framed(requests.size());
  std::vector<std::string_view> parts(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    const std::string body = requests[i].SerializeAsString();
    char length[4];
    EncodePeerReadRequestLength(static_cast<uint32_t>(body.size()), length);
    framed[i].assign(length, sizeof(length));
    framed[i] += body;
    parts[i] = framed[i];
  }
  absl::Status failed = SendAll(fd, parts, what);
  for (size_t i = 0; failed.ok() && i < requests.size(); ++i) {
    bool reusable = false;
    absl::Status status = ReceiveAnswer(fd, outs[i], what, &reusable);
    if (!reusable) {
      failed = std::move(status);
      break;
    }
    exchanged.statuses.push_back(std::move(status));
    ++exchanged.answered;
  }
  exchanged.reusable = failed.ok();
  exchanged.statuses.resize(requests.size(), failed);
  return exchanged;
}

absl::Status PeerReadConnections::ReceiveAnswer(int fd, std::span<char> out,
                                                const std::string& what, bool* reusable) {
  char header_bytes[kPeerReadAnswerHeaderBytes];
  GRANARY_RETURN_IF_ERROR(ReceiveExactly(fd, header_bytes, what));
  absl::StatusOr<PeerReadAnswerHeader> header = DecodePeerReadAnswer(header_bytes);
  if (!header.ok()) {
    return absl::DataLossError(absl::StrCat(AsAbsl(what), ": ", header.status().message()));
  }
  std::string message(header->message_bytes, '\0');
  GRANARY_RETURN_IF_ERROR(ReceiveExactly(fd, message, what));
  if (header->code != absl::StatusCode::kOk) {
    *reusable = true;
    return absl::Status(header->code, message);
  }
  if (header->byte_count != out.size()) {
    return absl::DataLossError(absl::StrCat("server ", address_, " sent ", header->byte_count,
                                            " bytes where ", out.size(), " were asked for"));
  }
  GRANARY_RETURN_IF_ERROR(ReceiveExactly(fd, out, what));
  *reusable = true;
  if (!header->from_cache) NoteReadOrigin(ReadOrigin::kSource);
  return absl::OkStatus();
}

PeerReadConnections::Result PeerReadConnections::Read(const v1::ReadChunkRequest& request,
                                                      std::span<char> out) {
  const std::span<char> outs[] = {out};
  Results read = ReadMany(std::span(&request, 1), outs);
  return {read.outcome, read.outcome == Outcome::kRead ? read.statuses[0] : read.status};
}

PeerReadConnections::Results PeerReadConnections::ReadMany(
    std::span<const v1::ReadChunkRequest> requests, std::span<const std::span<char>> outs) {
  if (requests.empty()) return {};
  if (requests.size() > kMaxPipelinedReads) {
    return {Outcome::kRead,
            {},
            std::vector<absl::Status>(
                requests.size(),
                absl::InvalidArgumentError(absl::StrCat(
                    requests.size(), " reads sent at once; at most ", kMaxPipelinedReads)))};
  }
  UniqueFd fd;
  {
    MutexLock lock(&mutex_);
    if (!idle_.empty()) {
      fd = std::move(idle_.back());
      idle_.pop_back();
    }
  }
  if (fd.valid()) {
    Exchanged exchanged = ReadOn(std::move(fd), requests, outs);
    if (exchanged.answered > 0 || !absl::IsUnavailable(exchanged.statuses[0])) {
      return {Outcome::kRead, {}, std::move(exchanged.statuses)};
    }
    // The server closed a kept connection while it was idle: restarted, most
    // likely, which closed every other kept connection too.
    std::vector<UniqueFd> dropped;
    MutexLock lock(&mutex_);
    dropped.swap(idle_);
  }
  Connected connected = Connect();
  if (!connected.fd.valid()) {
    if (connected.unconnected.outcome != Outcome::kRead) {
      return {connected.unconnected.outcome, connected.unconnected.status, {}};
    }
    return {Outcome::kRead,
            {},
            std::vector<absl::Status>(requests.size(), connected.unconnected.status)};
  }
  return {Outcome::kRead, {}, ReadOn(std::move(connected.fd), requests, outs).statuses};
}

PeerReadConnections::Exchanged PeerReadConnections::ReadOn(
    UniqueFd fd, std::span<const v1::ReadChunkRequest> requests,
    std::span<const std::span<char>> outs) {
  Exchanged exchanged = Exchange(fd.get(), requests, outs);
  if (exchanged.reusable) {
    MutexLock lock(&mutex_);
    idle_.push_back(std::move(fd));
  }
  return exchanged;
}

}  // namespace granary
