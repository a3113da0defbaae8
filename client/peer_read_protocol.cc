#include "client/peer_read_protocol.h"

#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/base/absl_compat.h"
#include "common/base/big_endian.h"
#include "common/base/status.h"

namespace granary {
namespace {

absl::Status TransportError(int error, std::string_view what) {
  if (error == EAGAIN || error == EWOULDBLOCK) {
    return absl::DeadlineExceededError(absl::StrCat(AsAbsl(what), ": timed out"));
  }
  return absl::UnavailableError(absl::StrCat(AsAbsl(what), ": ", std::strerror(error)));
}

}  // namespace

std::string EncodePeerReadHello(std::string_view token) {
  std::string hello(kPeerReadMagic, sizeof(kPeerReadMagic));
  hello.push_back(static_cast<char>(kPeerReadVersion));
  AppendBigEndian(token.size(), 2, &hello);
  hello.append(token);
  return hello;
}

absl::StatusOr<PeerReadHello> DecodePeerReadHello(
    std::span<const char, kPeerReadHelloHeaderBytes> header) {
  if (std::memcmp(header.data(), kPeerReadMagic, sizeof(kPeerReadMagic)) != 0) {
    return absl::InvalidArgumentError("not a peer read connection (wrong magic)");
  }
  const std::string_view bytes(header.data(), header.size());
  if (static_cast<uint8_t>(header[4]) != kPeerReadVersion) {
    return absl::InvalidArgumentError(absl::StrCat("peer read protocol version ",
                                                   static_cast<uint8_t>(header[4]),
                                                   " is not spoken here (", kPeerReadVersion, ")"));
  }
  PeerReadHello hello{static_cast<uint16_t>(ReadBigEndian(bytes.substr(5), 2))};
  if (hello.token_bytes > kMaxPeerReadTokenBytes) {
    return absl::InvalidArgumentError(absl::StrCat("a peer read hello's token of ",
                                                   hello.token_bytes, " bytes is over ",
                                                   kMaxPeerReadTokenBytes));
  }
  return hello;
}

std::string EncodePeerReadAnswer(const absl::Status& status, bool from_cache, uint32_t byte_count) {
  const std::string_view message = AsStd(status.message()).substr(0, kMaxPeerReadMessageBytes);
  std::string answer;
  answer.reserve(kPeerReadAnswerHeaderBytes + message.size());
  answer.push_back(static_cast<char>(status.code()));
  answer.push_back(from_cache ? 1 : 0);
  AppendBigEndian(message.size(), 2, &answer);
  AppendBigEndian(byte_count, 4, &answer);
  answer.append(message);
  return answer;
}

absl::StatusOr<PeerReadAnswerHeader> DecodePeerReadAnswer(
    std::span<const char, kPeerReadAnswerHeaderBytes> header) {
  const std::string_view bytes(header.data(), header.size());
  const uint8_t code = static_cast<uint8_t>(header[0]);
  if (code > static_cast<uint8_t>(absl::StatusCode::kUnauthenticated)) {
    return absl::InvalidArgumentError(
        absl::StrCat("a peer read answer carries status code ", code, ", which is none"));
  }
  PeerReadAnswerHeader answer;
  answer.code = static_cast<absl::StatusCode>(code);
  answer.from_cache = header[1] != 0;
  answer.message_bytes = static_cast<uint16_t>(ReadBigEndian(bytes.substr(2), 2));
  answer.byte_count = static_cast<uint32_t>(ReadBigEndian(bytes.substr(4), 4));
  if (answer.message_bytes > kMaxPeerReadMessageBytes) {
    return absl::InvalidArgumentError(absl::StrCat("a peer read answer's message of ",
                                                   answer.message_bytes, " bytes is over ",
                                                   kMaxPeerReadMessageBytes));
  }
  return answer;
}

void EncodePeerReadRequestLength(uint32_t length, char (&out)[4]) { PutBigEndian(length, 4, out); }

uint32_t DecodePeerReadRequestLength(const char (&in)[4]) {
  return static_cast<uint32_t>(ReadBigEndian(std::string_view(in, 4), 4));
}

absl::Status SendAll(int fd, std::span<const std::string_view> parts, std::string_view what) {
  std::vector<iovec> pending;
  pending.reserve(parts.size());
  for (std::string_view part : parts) {
    if (!part.empty()) pending.push_back({const_cast<char*>(part.data()), part.size()});
  }
  size_t first = 0;
  while (first < pending.size()) {
    msghdr message{};
    message.msg_iov = pending.data() + first;
    message.msg_iovlen = pending.size() - first;
    ssize_t sent = ::sendmsg(fd, &message, MSG_NOSIGNAL);
    if (sent < 0) {
      if (errno == EINTR) continue;
      return TransportError(errno, what);
    }
    for (size_t left = static_cast<size_t>(sent); left > 0;) {
      iovec& part = pending[first];
      const size_t taken = std::min(left, part.iov_len);
      part.iov_base = static_cast<char*>(part.iov_base) + taken;
      part.iov_len -= taken;
      left -= taken;
      if (part.iov_len == 0) ++first;
    }
  }
  return absl::OkStatus();
}

namespace {

// ReceiveExactly(), before `deadline` when there is one.
absl::Status Receive(int fd, std::span<char> out, std::string_view what,
                     const std::chrono::steady_clock::time_point* deadline) {
  size_t received = 0;
  while (received < out.size()) {
    if (deadline != nullptr) {
      const auto left = std::chrono::duration_cast<std::chrono::microseconds>(
          *deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return TransportError(EAGAIN, what);
      const timeval limit{static_cast<time_t>(left.count() / 1'000'000),
                          static_cast<suseconds_t>(left.count() % 1'000'000)};
      ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
    }
    ssize_t got = ::recv(fd, out.data() + received, out.size() - received, MSG_WAITALL);
    if (got < 0) {
      if (errno == EINTR) continue;
      return TransportError(errno, what);
    }
    if (got == 0) {
      return absl::UnavailableError(absl::StrCat(AsAbsl(what), ": the connection closed after ",
                                                 received, " of ", out.size(), " bytes"));
    }
    received += static_cast<size_t>(got);
    // MSG_WAITALL returns less when the receive timeout passed (a further
    // wait would start the timeout over) or the connection ended.
    if (received < out.size()) {
      char byte;
      if (::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) < 0 &&
          (errno == EAGAIN || errno == EWOULDBLOCK)) {
        return TransportError(EAGAIN, what);
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ReceiveExactly(int fd, std::span<char> out, std::string_view what) {
  return Receive(fd, out, what, nullptr);
}

absl::Status ReceiveExactlyBefore(int fd, std::span<char> out,
                                  std::chrono::steady_clock::time_point deadline,
                                  std::string_view what) {
  return Receive(fd, out, what, &deadline);
}

}  // namespace granary
