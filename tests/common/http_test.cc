// HttpServer in-process over real sockets, spoken to byte by byte as clients
// (well-behaved and not) would: keep-alive and pipelining, chunked bodies,
// 100-continue, and every limit of common/net/http.h with the answer it gives;
// and the same over TLS, with a certificate openssl makes for the test.
#include "common/net/http.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace granary {
namespace {

struct Answer {
  int status = -1;  // -1: the connection closed (or timed out) first, or the answer was garbled.
  std::string head;
  std::string body;
};

// A TCP client that sends raw bytes, in the clear or, when given a TLS
// context, over TLS (blocking OpenSSL on the same socket).
class RawClient {
 public:
  explicit RawClient(int port, SSL_CTX* tls = nullptr) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
    timeval timeout{.tv_sec = 10, .tv_usec = 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    if (tls != nullptr && connected_) {
      tls_ = SSL_new(tls);
      SSL_set_fd(tls_, fd_);
      connected_ = SSL_connect(tls_) == 1;
    }
  }
  ~RawClient() {
    if (tls_ != nullptr) SSL_free(tls_);
    ::close(fd_);
  }

  bool connected() const { return connected_; }
  bool Send(std::string_view bytes) {
    if (tls_ != nullptr) {
      return SSL_write(tls_, bytes.data(), static_cast<int>(bytes.size())) ==
             static_cast<int>(bytes.size());
    }
    return ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
           static_cast<ssize_t>(bytes.size());
  }
  // One response: its status line and headers, and its Content-Length body.
  Answer Read() {
    Answer answer;
    size_t end;
    while ((end = buffer_.find("\r\n\r\n")) == std::string::npos) {
      if (!Fill()) return answer;
    }
    answer.head = buffer_.substr(0, end);
    buffer_.erase(0, end + 4);
    if (!absl::SimpleAtoi(answer.head.substr(9, 3), &answer.status)) return Answer{};
    size_t length = 0;
    if (size_t at = answer.head.find("Content-Length: ");
        at != std::string::npos &&
        !absl::SimpleAtoi(answer.head.substr(at + 16, answer.head.find("\r\n", at) - at - 16),
                          &length)) {
      return Answer{};
    }
    while (buffer_.size() < length) {
      if (!Fill()) return Answer{};
    }
    answer.body = buffer_.substr(0, length);
    buffer_.erase(0, length);
    return answer;
  }
  // True when the server closed the connection (after what was read).
  bool Closed() {
    while (Fill()) {
    }
    return eof_ && buffer_.empty();
  }

 private:
  bool Fill() {
    char chunk[4096];
    ssize_t got = 0;
    if (tls_ != nullptr) {
      got = SSL_read(tls_, chunk, sizeof(chunk));
      // A close_notify, or the end of the stream without one.
      if (got <= 0) {
        const int error = SSL_get_error(tls_, static_cast<int>(got));
        eof_ = error == SSL_ERROR_ZERO_RETURN || error == SSL_ERROR_SYSCALL;
        return false;
      }
    } else {
      got = ::recv(fd_, chunk, sizeof(chunk), 0);
    }
    if (got <= 0) {
      eof_ = got == 0;
      return false;
    }
    buffer_.append(chunk, static_cast<size_t>(got));
    return true;
  }

  int fd_ = -1;
  SSL* tls_ = nullptr;
  bool connected_ = false;
  bool eof_ = false;
  std::string buffer_;
};

std::string Post(const std::string& path, const std::string& body) {
  return absl::StrCat("POST ", path, " HTTP/1.1\r\nHost: test\r\nContent-Length: ", body.size(),
                      "\r\n\r\n", body);
}

class HttpServerTest : public ::testing::Test {
 protected:
  void Serve(HttpServerOptions options) {
    server_ = std::make_unique<HttpServer>(options);
    server_->Handle("GET", "/healthz", [](const HttpRequest&) {
      return HttpResponse{200, "text/plain", "ok\n"};
    });
    server_->Handle("POST", "/echo", [](const HttpRequest& request) {
      return HttpResponse{200, "application/octet-stream", request.body};
    });
    ASSERT_TRUE(server_->Start("127.0.0.1:0").ok());
  }
  HttpServerOptions Small() {
    HttpServerOptions options;
    options.max_header_bytes = 1024;
    options.max_body_bytes = 1000;
    options.max_buffered_body_bytes = 1500;
    return options;
  }

  std::unique_ptr<HttpServer> server_;
};

TEST_F(HttpServerTest, ServesKeepAliveAndPipelinedRequestsInOrder) {
  Serve({});
  RawClient client(server_->port());
  ASSERT_TRUE(client.Send("GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n" + Post("/echo", "first") +
                          "GET /healthz?probe=1 HTTP/1.1\r\n\r\n"));
  Answer health = client.Read();
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.body, "ok\n");
  EXPECT_NE(health.head.find("Connection: keep-alive"), std::string::npos) << health.head;
  EXPECT_EQ(client.Read().body, "first");
  EXPECT_EQ(client.Read().body, "ok\n");
  ASSERT_TRUE(client.Send(Post("/echo", "second")));
  EXPECT_EQ(client.Read().body, "second");
  ASSERT_TRUE(client.Send("GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n"));
  EXPECT_EQ(client.Read().status, 200);
  EXPECT_TRUE(client.Closed());
}

TEST_F(HttpServerTest, UnknownPathsAndMethodsAreRefused) {
  Serve({});
  RawClient client(server_->port());
  ASSERT_TRUE(client.Send("GET /nothing HTTP/1.1\r\n\r\nDELETE /healthz HTTP/1.1\r\n\r\n"));
  Answer missing = client.Read();
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(missing.body, "no such path: /nothing\n");
  Answer method = client.Read();
  EXPECT_EQ(method.status, 405);
  EXPECT_EQ(method.body, "DELETE is not served on /healthz\n");
}

TEST_F(HttpServerTest, ChunkedBodyIsDecoded) {
  Serve(Small());
  RawClient client(server_->port());
  ASSERT_TRUE(client.Send(
      "POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n4;ext=1\r\nWiki\r\n5\r\npedia\r\n"
      "0\r\nTrailer: x\r\n\r\n"));
  Answer answer = client.Read();
  EXPECT_EQ(answer.status, 200);
  EXPECT_EQ(answer.body, "Wikipedia");
}

TEST_F(HttpServerTest, BodyOverTheLimitIsRefusedFromItsContentLength) {
  Serve(Small());
  RawClient client(server_->port());
  // Only the headers are sent: the refusal does not wait for the body.
  ASSERT_TRUE(client.Send("POST /echo HTTP/1.1\r\nContent-Length: 1000000000\r\n\r\n"));
  Answer answer = client.Read();
  EXPECT_EQ(answer.status, 413);
  EXPECT_EQ(answer.body, "request body of 1000000000 bytes exceeds the limit of 1000 bytes\n");
  EXPECT_NE(answer.head.find("Connection: close"), std::string::npos);
  EXPECT_TRUE(client.Closed());

  RawClient at_limit(server_->port());
  ASSERT_TRUE(at_limit.Send(Post("/echo", std::string(1000, 'x'))));
  EXPECT_EQ(at_limit.Read().body, std::string(1000, 'x'));
}

TEST_F(HttpServerTest, ChunkedBodyOverTheLimitIsRefusedWhileItArrives) {
  Serve(Small());
  RawClient client(server_->port());
  ASSERT_TRUE(client.Send("POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"));
  ASSERT_TRUE(client.Send("258\r\n" + std::string(600, 'x') + "\r\n"));
  // The second chunk's size line already takes the body past 1000 bytes.
  ASSERT_TRUE(client.Send("258\r\n"));
  Answer answer = client.Read();
  EXPECT_EQ(answer.status, 413);
  EXPECT_EQ(answer.body, "chunked request body exceeds the limit of 1000 bytes\n");
  EXPECT_TRUE(client.Closed());
}

TEST_F(HttpServerTest, HeadersOverTheLimitAreRefused) {
  Serve(Small());
  RawClient client(server_->port());
  ASSERT_TRUE(client.Send("GET /healthz HTTP/1.1\r\n"));
  for (int i = 0; i < 20; ++i)
    ASSERT_TRUE(client.Send("X-Filler: " + std::string(90, 'f') + "\r\n"));
  Answer answer = client.Read();
  EXPECT_EQ(answer.status, 431);
  EXPECT_EQ(answer.body, "request line and headers exceed the limit of 1024 bytes\n");
  EXPECT_TRUE(client.Closed());
}

TEST_F(HttpServerTest, AmbiguousOrMalformedRequestsAreRefused) {
  Serve(Small());
  for (auto [request, status, message] :
       {std::tuple{"POST /echo HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
                   400, "a request may not carry both Content-Length and Transfer-Encoding"},
        std::tuple{"POST /echo HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n", 400,
                   "Content-Length is given twice with different values"},
        std::tuple{"POST /echo HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400,
                   "Content-Length is not a number of at most 18 digits"},
        std::tuple{"POST /echo HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 501,
                   "Transfer-Encoding 'gzip' is not served; only chunked is"},
        std::tuple{"GET /healthz HTTP/1.1\r\nX-A: 1\r\n folded\r\n\r\n", 400,
                   "header line folding is not accepted (RFC 9112 5.2)"},
        std::tuple{"GET healthz HTTP/1.1\r\n\r\n", 400,
                   "malformed request line (METHOD TARGET HTTP/1.x)"},
        std::tuple{"GET /healthz HTTP/2.0\r\n\r\n", 505,
                   "only HTTP/1.0 and HTTP/1.1 are served"}}) {
    RawClient client(server_->port());
    ASSERT_TRUE(client.Send(request));
    Answer answer = client.Read();
    EXPECT_EQ(answer.status, status) << request;
    EXPECT_EQ(answer.body, absl::StrCat(message, "\n")) << request;
    EXPECT_TRUE(client.Closed()) << request;
  }
}

TEST_F(HttpServerTest, ExpectContinueIsAnsweredBeforeTheBody) {
  Serve(Small());
  RawClient client(server_->port());
  ASSERT_TRUE(
      client.Send("POST /echo HTTP/1.1\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n"));
  EXPECT_EQ(client.Read().status, 100);
  ASSERT_TRUE(client.Send("hello"));
  EXPECT_EQ(client.Read().body, "hello");
}

TEST_F(HttpServerTest, ARequestTricklingPastItsDeadlineGets408) {
  HttpServerOptions options = Small();
  options.request_timeout = std::chrono::milliseconds(300);
  Serve(options);
  RawClient client(server_->port());
  ASSERT_TRUE(client.Send("GET /healthz HTTP/1.1\r\n"));
  // One header byte every 50 ms: each recv() is prompt, the request never
  // ends. Stops when the server has answered and closed.
  bool sending = true;
  for (int i = 0; i < 200 && sending; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    sending = client.Send("x");
  }
  Answer answer = client.Read();
  EXPECT_EQ(answer.status, 408);
  EXPECT_EQ(answer.body, "the request did not arrive whole within the limit of 300 ms\n");
}

TEST_F(HttpServerTest, AnIdleKeepAliveConnectionIsClosed) {
  HttpServerOptions options = Small();
  options.idle_timeout = std::chrono::milliseconds(200);
  Serve(options);
  RawClient client(server_->port());
  ASSERT_TRUE(client.Send("GET /healthz HTTP/1.1\r\n\r\n"));
  EXPECT_EQ(client.Read().status, 200);
  // Read() waits up to 10 s; the server closes after 200 ms idle.
  EXPECT_TRUE(client.Closed());
}

TEST_F(HttpServerTest, AConnectionOverTheCapIsAnswered503AndClosed) {
  HttpServerOptions options = Small();
  options.max_connections = 4;
  Serve(options);
  std::vector<std::unique_ptr<RawClient>> held;
  for (int i = 0; i < 4; ++i) {
    held.push_back(std::make_unique<RawClient>(server_->port()));
    ASSERT_TRUE(held.back()->Send("GET /healthz HTTP/1.1\r\n\r\n"));
    ASSERT_EQ(held.back()->Read().status, 200);
  }
  RawClient extra(server_->port());
  ASSERT_TRUE(extra.connected());
  Answer answer = extra.Read();
  EXPECT_EQ(answer.status, 503);
  EXPECT_EQ(answer.body, "the server holds its limit of 4 connections; retry later\n");
  EXPECT_TRUE(extra.Closed());
  // Once one leaves, a new client is served.
  held.pop_back();
  Answer served;
  for (int attempt = 0; attempt < 50 && served.status != 200; ++attempt) {
    RawClient again(server_->port());
    if (again.Send("GET /healthz HTTP/1.1\r\n\r\n")) served = again.Read();
    if (served.status != 200) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(served.status, 200);
}

TEST_F(HttpServerTest, BodiesBeyondTheBufferBudgetAreAnswered503) {
  Serve(Small());  // 1000 bytes a body, 1500 buffered in all.
  RawClient first(server_->port());
  ASSERT_TRUE(first.Send("POST /echo HTTP/1.1\r\nContent-Length: 1000\r\n\r\nabc"));
  RawClient second(server_->port());
  ASSERT_TRUE(second.Send("POST /echo HTTP/1.1\r\nContent-Length: 1000\r\n\r\n"));
  Answer refused = second.Read();
  EXPECT_EQ(refused.status, 503);
  EXPECT_EQ(refused.body,
            "the server is buffering its limit of 1500 bytes of request bodies; retry later\n");
  // The first completes, and its bytes are released.
  ASSERT_TRUE(first.Send(std::string(997, 'y')));
  EXPECT_EQ(first.Read().body, "abc" + std::string(997, 'y'));
  RawClient third(server_->port());
  ASSERT_TRUE(third.Send(Post("/echo", std::string(1000, 'z'))));
  EXPECT_EQ(third.Read().status, 200);
}

// A server with a certificate for 127.0.0.1, and a client context that
// trusts it.
class HttpsServerTest : public HttpServerTest {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/granary-https-test-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
    cert_ = dir_ + "/server.crt";
    key_ = dir_ + "/server.key";
    const std::string command = absl::StrCat(
        "/usr/bin/openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 "
        "-addext subjectAltName=IP:127.0.0.1 -keyout ",
        key_, " -out ", cert_, " 2>", dir_, "/openssl.log");
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
    client_ = SSL_CTX_new(TLS_client_method());
    ASSERT_EQ(SSL_CTX_load_verify_locations(client_, cert_.c_str(), nullptr), 1);
    SSL_CTX_set_verify(client_, SSL_VERIFY_PEER, nullptr);
  }
  void TearDown() override {
    SSL_CTX_free(client_);
    std::filesystem::remove_all(dir_);
  }
  HttpServerOptions Tls(HttpServerOptions options) {
    options.tls_certificate_file = cert_;
    options.tls_key_file = key_;
    return options;
  }

  std::string dir_, cert_, key_;
  SSL_CTX* client_ = nullptr;
};

TEST_F(HttpsServerTest, ServesKeepAlivePipelinedAndLargeRequestsOverTls) {
  Serve(Tls({}));
  RawClient client(server_->port(), client_);
  ASSERT_TRUE(client.connected());
  ASSERT_TRUE(client.Send("GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n" + Post("/echo", "first") +
                          "GET /healthz HTTP/1.1\r\n\r\n"));
  EXPECT_EQ(client.Read().body, "ok\n");
  EXPECT_EQ(client.Read().body, "first");
  EXPECT_EQ(client.Read().body, "ok\n");
  // Many TLS records each way.
  const std::string large(900 << 10, 'L');
  ASSERT_TRUE(client.Send(Post("/echo", large)));
  Answer echoed = client.Read();
  EXPECT_EQ(echoed.status, 200);
  EXPECT_EQ(echoed.body, large);
  ASSERT_TRUE(client.Send("GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n"));
  EXPECT_EQ(client.Read().status, 200);
  EXPECT_TRUE(client.Closed());
}

TEST_F(HttpsServerTest, PlainHttpIsToldTheCertificateIsNeededAndLimitsStillHold) {
  HttpServerOptions options = Small();
  options.max_connections = 2;
  Serve(Tls(options));
  {
    RawClient plain(server_->port());
    ASSERT_TRUE(plain.Send("GET /healthz HTTP/1.1\r\n\r\n"));
    Answer told = plain.Read();
    EXPECT_EQ(told.status, 400);
    EXPECT_EQ(told.body, "this port speaks HTTPS; the request came as plain HTTP\n");
    EXPECT_TRUE(plain.Closed());
    RawClient large(server_->port(), client_);
    ASSERT_TRUE(large.Send(Post("/echo", std::string(1001, 'x'))));
    EXPECT_EQ(large.Read().status, 413);
  }

  // Over the connection cap a TLS client gets no plain answer it could not
  // read: the connection is closed. (The two above leave once the server
  // sees them close.)
  std::unique_ptr<RawClient> first, second;
  for (int attempt = 0; attempt < 50; ++attempt) {
    first = std::make_unique<RawClient>(server_->port(), client_);
    second = std::make_unique<RawClient>(server_->port(), client_);
    if (first->connected() && second->connected()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(first->connected() && second->connected());
  RawClient extra(server_->port(), client_);
  EXPECT_FALSE(extra.connected());
}

TEST_F(HttpsServerTest, UnusableCertificateOrKeyFailsStart) {
  HttpServerOptions options;
  options.tls_certificate_file = cert_;
  EXPECT_EQ(HttpServer(options).Start("127.0.0.1:0"),
            absl::InvalidArgumentError(
                "HTTP server options tls_certificate_file and tls_key_file must be set together"));
  options.tls_key_file = cert_;  // A certificate where the key should be.
  absl::Status started = HttpServer(options).Start("127.0.0.1:0");
  EXPECT_EQ(started.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(started.message().find("cannot load the TLS private key " + cert_), std::string::npos)
      << started;
}

TEST(HttpServerOptionsTest, ZeroLimitsAreRefusedAtStart) {
  HttpServerOptions options;
  options.max_body_bytes = 0;
  HttpServer server(options);
  absl::Status started = server.Start("127.0.0.1:0");
  EXPECT_EQ(started, absl::InvalidArgumentError("HTTP server option max_body_bytes is 0"));
}

}  // namespace
}  // namespace granary
