// The peer read protocol on a real granaryd's TCP port: reads through it give
// the bytes and the errors gRPC's ReadChunk gives, gRPC keeps working on the
// same port, a reader without the cluster token is refused, and malformed
// hellos and requests get an answer naming what was wrong while the server
// keeps serving everyone else.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "client/dataset_client.h"
#include "client/peer_read_connections.h"
#include "client/peer_read_protocol.h"
#include "common/base/big_endian.h"
#include "common/net/server_address.h"
#include "tests/server/server_test_util.h"
#include "tests/support/granaryd_process.h"
#include "tests/support/silent_listener.h"

namespace granary::testing {
namespace {

constexpr uint32_t kChunk = 1 << 20;

class PeerReadTest : public GranarydTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(StartServer());
    content_ = PatternBytes(kChunk + 5000, 9);
    ASSERT_NO_FATAL_FAILURE(RegisterOneFile("d", "f.bin", content_, kChunk, &version_, &file_id_));
  }

  std::unique_ptr<DatasetClient> TcpClient(std::string token) {
    DatasetClient::Options options;
    options.cluster_token = std::move(token);
    auto client = DatasetClient::Connect(server_->tcp_address(), options);
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? *std::move(client) : nullptr;
  }

  v1::ReadChunkRequest Request(uint32_t chunk, uint32_t offset, uint32_t length) const {
    v1::ReadChunkRequest request;
    ChunkKey{version_, file_id_, chunk}.ToProto(request.mutable_key());
    request.set_offset(offset);
    request.set_length(length);
    return request;
  }

  // A raw connection to the TCP port, past a hello with the right token.
  int Connected() {
    auto fd = ConnectTcp(server_->tcp_address(), std::chrono::seconds(5));
    EXPECT_TRUE(fd.ok()) << fd.status();
    if (!fd.ok()) return -1;
    const timeval limit{10, 0};
    ::setsockopt(fd->get(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
    return fd->Release();
  }
  void Send(int fd, std::string_view bytes) {
    const std::string_view parts[] = {bytes};
    ASSERT_TRUE(SendAll(fd, parts, "test").ok());
  }
  // The next answer on `fd`: its status, after `magic` first when asked.
  absl::Status Answer(int fd, bool magic = false) {
    if (magic) {
      char got[sizeof(kPeerReadMagic)];
      if (absl::Status read = ReceiveExactly(fd, got, "test"); !read.ok()) return read;
      EXPECT_EQ(std::memcmp(got, kPeerReadMagic, sizeof(got)), 0);
    }
    char header[kPeerReadAnswerHeaderBytes];
    if (absl::Status read = ReceiveExactly(fd, header, "test"); !read.ok()) return read;
    auto decoded = DecodePeerReadAnswer(header);
    EXPECT_TRUE(decoded.ok()) << decoded.status();
    std::string message(decoded->message_bytes, '\0');
    EXPECT_TRUE(ReceiveExactly(fd, message, "test").ok());
    std::string bytes(decoded->byte_count, '\0');
    EXPECT_TRUE(ReceiveExactly(fd, bytes, "test").ok());
    return absl::Status(decoded->code, message);
  }
  std::string Framed(const v1::ReadChunkRequest& request) {
    const std::string body = request.SerializeAsString();
    std::string framed;
    AppendBigEndian(body.size(), 4, &framed);
    return framed + body;
  }
  // Whether the server closed `fd` (within the receive timeout); a reset
  // when it closed with bytes of ours unread.
  static bool Closed(int fd) {
    char byte;
    ssize_t got = ::recv(fd, &byte, 1, 0);
    return got == 0 || (got < 0 && errno == ECONNRESET);
  }

  std::string content_;
  uint64_t version_ = 0;
  uint64_t file_id_ = 0;
};

TEST_F(PeerReadTest, ReadsGiveTheBytesAndErrorsOfGrpcOnTheSamePort) {
  auto client = TcpClient(server_->cluster_token());
  ASSERT_NE(client, nullptr);
  for (auto [chunk, offset, length] : std::vector<std::tuple<uint32_t, uint32_t, uint32_t>>{
           {0, 0, kChunk}, {0, 12345, 110 << 10}, {1, 0, 5000}, {1, 4999, 1}}) {
    std::string out(length, '\0');
    ASSERT_TRUE(client->ReadChunk({version_, file_id_, chunk}, offset, out).ok());
    EXPECT_EQ(out, content_.substr(uint64_t{chunk} * kChunk + offset, length));
  }
  // Past the file's end, an unknown version, a short chunk: as over gRPC.
  std::string out(10, '\0');
  EXPECT_EQ(client->ReadChunk({version_, file_id_, 2}, 0, out).code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_EQ(client->ReadChunk({version_ + 1, file_id_, 0}, 0, out).code(),
            absl::StatusCode::kNotFound);
  std::string longer(6000, '\0');
  absl::Status short_read = client->ReadChunk({version_, file_id_, 1}, 0, longer);
  EXPECT_EQ(short_read.code(), absl::StatusCode::kDataLoss) << short_read;
  // gRPC on the same port, on the same client.
  auto datasets = client->ListDatasets();
  ASSERT_TRUE(datasets.ok()) << datasets.status();
  EXPECT_EQ(datasets->size(), 1u);
  // Each read above went over the protocol, none over gRPC.
  PeerReadConnections direct(server_->tcp_address(), server_->cluster_token(),
                             std::chrono::seconds(5));
  std::string piece(100, '\0');
  PeerReadConnections::Result read = direct.Read(Request(0, 7, 100), piece);
  EXPECT_EQ(read.outcome, PeerReadConnections::Outcome::kRead);
  EXPECT_TRUE(read.status.ok()) << read.status;
  EXPECT_EQ(piece, content_.substr(7, 100));
}

TEST_F(PeerReadTest, AKeptConnectionCutByARestartIsReplacedUnseen) {
  auto client = TcpClient(server_->cluster_token());
  ASSERT_NE(client, nullptr);
  // Reads at once keep a connection each.
  std::vector<std::thread> readers;
  std::atomic<int> read_ok{0};
  for (int i = 0; i < 4; ++i) {
    readers.emplace_back([&] {
      std::string piece(kChunk, '\0');
      if (client->ReadChunk({version_, file_id_, 0}, 0, piece).ok()) ++read_ok;
    });
  }
  for (std::thread& reader : readers) reader.join();
  ASSERT_EQ(read_ok.load(), 4);
  std::string out(4096, '\0');
  // The connections the reads kept die with the server.
  ASSERT_TRUE(server_->Restart().ok());
  absl::Status read = client->ReadChunk({version_, file_id_, 0}, 100, out);
  ASSERT_TRUE(read.ok()) << read;
  EXPECT_EQ(out, content_.substr(100, out.size()));
}

// Reads sent at once on one connection come back in order, each with its own
// bytes or error; a kept connection the server cut meanwhile is replaced
// unseen, as for single reads.
TEST_F(PeerReadTest, ReadsSentAtOnceAreAnsweredInOrderEachWithItsOwnError) {
  auto client = TcpClient(server_->cluster_token());
  ASSERT_NE(client, nullptr);
  std::string whole(kChunk, '\0');
  std::string tail(5000, '\0');
  const DatasetClient::ChunkRead good[] = {{{version_, file_id_, 1}, tail},
                                           {{version_, file_id_, 0}, whole}};
  const auto read_good = [&] {
    std::vector<absl::Status> read = client->ReadChunks(good, ChunkSourcing::kReadThrough);
    ASSERT_EQ(read.size(), 2u);
    EXPECT_TRUE(read[0].ok() && read[1].ok()) << read[0] << " " << read[1];
    EXPECT_EQ(tail, content_.substr(kChunk));
    EXPECT_EQ(whole, content_.substr(0, kChunk));
  };
  read_good();
  ASSERT_TRUE(server_->Restart().ok());
  read_good();

  std::string past_end(10, '\0');
  std::string too_long(6000, '\0');
  std::string after(5000, '\0');
  const DatasetClient::ChunkRead mixed[] = {{{version_, file_id_, 2}, past_end},
                                            {{version_ + 1, file_id_, 0}, past_end},
                                            {{version_, file_id_, 1}, tail},
                                            {{version_, file_id_, 1}, too_long},
                                            {{version_, file_id_, 1}, after}};
  std::vector<absl::Status> read = client->ReadChunks(mixed, ChunkSourcing::kReadThrough);
  ASSERT_EQ(read.size(), std::size(mixed));
  EXPECT_EQ(read[0].code(), absl::StatusCode::kOutOfRange) << read[0];
  EXPECT_EQ(read[1].code(), absl::StatusCode::kNotFound) << read[1];
  EXPECT_TRUE(read[2].ok()) << read[2];
  EXPECT_EQ(read[3].code(), absl::StatusCode::kDataLoss) << read[3];
  // A wrong length loses the connection's framing: the read after it fails
  // with it, rather than take another read's bytes for its own.
  EXPECT_EQ(read[4].code(), absl::StatusCode::kDataLoss) << read[4];
  read_good();
}

TEST_F(PeerReadTest, ReadersWithoutTheClusterTokenAreRefused) {
  for (const std::string& token : {std::string(), std::string("not the token")}) {
    auto client = TcpClient(token);
    ASSERT_NE(client, nullptr);
    std::string out(100, '\0');
    absl::Status read = client->ReadChunk({version_, file_id_, 0}, 0, out);
    EXPECT_EQ(read.code(), absl::StatusCode::kUnauthenticated) << read;
    EXPECT_NE(read.message().find("cluster token"), absl::string_view::npos) << read;
  }
  // The server goes on serving members.
  auto member = TcpClient(server_->cluster_token());
  std::string out(100, '\0');
  EXPECT_TRUE(member->ReadChunk({version_, file_id_, 0}, 0, out).ok());
}

TEST_F(PeerReadTest, MalformedHellosAndRequestsAreAnsweredAndOthersStillServed) {
  // A version this server does not speak.
  int fd = Connected();
  std::string hello = EncodePeerReadHello(server_->cluster_token());
  hello[4] = 9;
  Send(fd, hello);
  absl::Status answer = Answer(fd, /*magic=*/true);
  EXPECT_EQ(answer.code(), absl::StatusCode::kInvalidArgument) << answer;
  EXPECT_NE(answer.message().find("version 9"), absl::string_view::npos) << answer;
  EXPECT_TRUE(Closed(fd));
  ::close(fd);

  // A token longer than any.
  fd = Connected();
  hello = EncodePeerReadHello(std::string(kMaxPeerReadTokenBytes + 1, 'x'));
  Send(fd, hello.substr(0, kPeerReadHelloHeaderBytes));
  answer = Answer(fd, /*magic=*/true);
  EXPECT_EQ(answer.code(), absl::StatusCode::kInvalidArgument) << answer;
  EXPECT_TRUE(Closed(fd));
  ::close(fd);

  // After a good hello: a body that is no request, then a request with no
  // key, each answered on a connection that still serves the next read.
  fd = Connected();
  Send(fd, EncodePeerReadHello(server_->cluster_token()));
  ASSERT_TRUE(Answer(fd, /*magic=*/true).ok());
  std::string garbage;
  AppendBigEndian(3, 4, &garbage);
  garbage += "\xff\xff\xff";
  Send(fd, garbage);
  answer = Answer(fd);
  EXPECT_EQ(answer.code(), absl::StatusCode::kInvalidArgument) << answer;
  Send(fd, Framed(v1::ReadChunkRequest()));
  answer = Answer(fd);
  EXPECT_EQ(answer.code(), absl::StatusCode::kInvalidArgument) << answer;
  EXPECT_NE(answer.message().find("no chunk key"), absl::string_view::npos) << answer;
  Send(fd, Framed(Request(0, 0, 64)));
  EXPECT_TRUE(Answer(fd).ok());
  // A request longer than any: answered, and the connection closed (its
  // framing is lost).
  std::string huge;
  AppendBigEndian(kMaxPeerReadRequestBytes + 1, 4, &huge);
  Send(fd, huge);
  answer = Answer(fd);
  EXPECT_EQ(answer.code(), absl::StatusCode::kInvalidArgument) << answer;
  EXPECT_TRUE(Closed(fd));
  ::close(fd);

  auto member = TcpClient(server_->cluster_token());
  std::string out(100, '\0');
  EXPECT_TRUE(member->ReadChunk({version_, file_id_, 0}, 0, out).ok());
}

TEST_F(PeerReadTest, ConnectionsThatStopMidHelloAreClosed) {
  int fd = Connected();
  Send(fd, std::string_view(kPeerReadMagic, sizeof(kPeerReadMagic)));
  const auto started = std::chrono::steady_clock::now();
  EXPECT_TRUE(Closed(fd));
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(9));
  ::close(fd);
}

TEST_F(PeerReadTest, AHelloTrickledInIsClosedAtItsDeadline) {
  // A byte every half second of a hello announcing the longest token: each
  // byte comes well within any receive timeout, the whole never.
  int fd = Connected();
  std::string hello = EncodePeerReadHello(std::string(kMaxPeerReadTokenBytes, 'x'));
  const auto started = std::chrono::steady_clock::now();
  bool closed = false;
  for (size_t sent = 0; sent < hello.size() && !closed; ++sent) {
    if (::send(fd, hello.data() + sent, 1, MSG_NOSIGNAL) != 1) break;
    pollfd polled{fd, POLLIN, 0};
    closed = ::poll(&polled, 1, 500) == 1 && Closed(fd);
  }
  const auto lasted = std::chrono::steady_clock::now() - started;
  EXPECT_TRUE(closed || Closed(fd));
  // The deadline is 3 s from the first byte (PeerReadServer::kHelloTimeout);
  // a receive timeout of the same length per wait would let it last longer.
  EXPECT_LT(lasted, std::chrono::seconds(5));
  ::close(fd);
}

TEST_F(PeerReadTest, AServerThatClosesInTheHelloSendsTheReadToGrpcAndOneThatStallsTimesOut) {
  // A server going away closes the connection before any byte: the read is
  // left to gRPC (the server may have turned only this connection away),
  // but not every read for a minute, as for a server without the protocol.
  const int port = FreeTcpPort();
  SilentListener closer(port, SilentListener::Accepted::kClosed);
  ASSERT_TRUE(closer.listening());
  PeerReadConnections closing("127.0.0.1:" + std::to_string(port), "", std::chrono::seconds(5));
  std::string out(10, '\0');
  PeerReadConnections::Result read = closing.Read(Request(0, 0, 10), out);
  EXPECT_EQ(read.outcome, PeerReadConnections::Outcome::kTurnedAway);
  EXPECT_EQ(read.status.code(), absl::StatusCode::kUnavailable) << read.status;
  // Over gRPC, the server is as unavailable.
  auto client = DatasetClient::Connect("127.0.0.1:" + std::to_string(port));
  ASSERT_TRUE(client.ok());
  absl::Status through_client = (*client)->ReadChunk({version_, file_id_, 0}, 0, out);
  EXPECT_EQ(through_client.code(), absl::StatusCode::kUnavailable) << through_client;

  const int silent_port = FreeTcpPort();
  SilentListener silent(silent_port);
  ASSERT_TRUE(silent.listening());
  PeerReadConnections stalled("127.0.0.1:" + std::to_string(silent_port), "",
                              std::chrono::milliseconds(300));
  read = stalled.Read(Request(0, 0, 10), out);
  EXPECT_EQ(read.outcome, PeerReadConnections::Outcome::kRead);
  EXPECT_EQ(read.status.code(), absl::StatusCode::kDeadlineExceeded) << read.status;
}

TEST_F(PeerReadTest, AReaderTurnedAwayByAFullHelloBudgetReadsOverGrpc) {
  // Unfinished hellos from this host, as many as the default budget lets one
  // host hold, and some over it (closed at once).
  constexpr int kHeldHellos = 12;
  std::vector<int> held;
  for (int i = 0; i < kHeldHellos; ++i) {
    int fd = Connected();
    Send(fd, std::string_view(kPeerReadMagic, sizeof(kPeerReadMagic)));
    held.push_back(fd);
  }
  // The acceptor hands them to the server as their first byte comes; the
  // first over the budget is closed and logged once the budget is full.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (server_->log().find("max_unauthenticated_connections_per_host") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  PeerReadConnections direct(server_->tcp_address(), server_->cluster_token(),
                             std::chrono::seconds(5));
  std::string piece(100, '\0');
  PeerReadConnections::Result turned_away = direct.Read(Request(0, 7, 100), piece);
  // A member's read made over gRPC meanwhile, while the budget is still full.
  auto client = TcpClient(server_->cluster_token());
  ASSERT_NE(client, nullptr);
  std::string out(kChunk, '\0');
  absl::Status read = client->ReadChunk({version_, file_id_, 0}, 0, out);
  EXPECT_EQ(turned_away.outcome, PeerReadConnections::Outcome::kTurnedAway) << turned_away.status;
  EXPECT_EQ(turned_away.status.code(), absl::StatusCode::kUnavailable) << turned_away.status;
  ASSERT_TRUE(read.ok()) << read;
  EXPECT_EQ(out, content_.substr(0, kChunk));
  // The server logged what it closed once, not per connection.
  EXPECT_NE(server_->log().find("max_unauthenticated_connections_per_host"), std::string::npos)
      << server_->log();
  for (int fd : held) ::close(fd);
  // Once the hellos are gone, reads go over the protocol again.
  PeerReadConnections::Result again;
  for (int attempt = 0; attempt < 50; ++attempt) {
    again = direct.Read(Request(0, 7, 100), piece);
    if (again.outcome == PeerReadConnections::Outcome::kRead) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(again.outcome, PeerReadConnections::Outcome::kRead);
  EXPECT_TRUE(again.status.ok()) << again.status;
  EXPECT_EQ(piece, content_.substr(7, 100));
}

TEST_F(PeerReadTest, AServerThatDoesNotSpeakTheProtocolIsReadOverGrpc) {
  // A gRPC server without the protocol (as a granaryd before it), whose
  // Granary service implements no method.
  const std::string address = "127.0.0.1:" + std::to_string(FreeTcpPort());
  ServerWithoutMethods other(address);
  ASSERT_TRUE(other.started());
  PeerReadConnections direct(address, "", std::chrono::seconds(5));
  std::string out(10, '\0');
  EXPECT_EQ(direct.Read(Request(0, 0, 10), out).outcome, PeerReadConnections::Outcome::kNotSpoken);
  // DatasetClient then asks over gRPC, which this server does not implement.
  auto client = DatasetClient::Connect(address);
  ASSERT_TRUE(client.ok());
  absl::Status read = (*client)->ReadChunk({version_, file_id_, 0}, 0, out);
  EXPECT_EQ(read.code(), absl::StatusCode::kUnimplemented) << read;
}

}  // namespace
}  // namespace granary::testing
