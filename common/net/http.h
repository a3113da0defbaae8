// A small HTTP/1.1 server and client for Granary's endpoints: the Prometheus
// metrics of granaryd, the Kubernetes scheduler extender and, over TLS, the
// Kubernetes admission webhook.
//
// HttpServer serves registered (method, path) handlers; other paths get 404,
// other methods on a known path 405. Its endpoints face whoever can reach the
// port, so every client is bounded (HttpServerOptions):
//   - one event-loop thread reads and writes every connection, so clients that
//     trickle bytes or sit idle hold no thread, only their buffered bytes;
//     complete requests go to a pool of handler threads;
//   - a request's line, headers and body must all arrive within
//     request_timeout of its first byte, however slowly they trickle (else 408);
//     a keep-alive connection may wait idle_timeout for its next request; a
//     reply must be taken within write_timeout;
//   - request line and headers at most max_header_bytes (431), body at most
//     max_body_bytes (413, refused from Content-Length before the body is read,
//     and while decoding a chunked body), and all bodies being buffered at once
//     at most max_buffered_body_bytes (503);
//   - at most max_connections connections: one over it is answered 503 and
//     closed at once.
// A refused request's answer names the limit, and the connection is closed.
//
// With a certificate and key (HttpServerOptions::tls_*), every connection
// speaks TLS 1.2 or later (OpenSSL over the same non-blocking sockets; the
// handshake counts against request_timeout). A client that sends plain HTTP
// to it is answered in plain text with a 400 saying the port speaks HTTPS;
// other failed handshakes are closed and logged with OpenSSL's reason. Over
// the connection limit a TLS client is closed without an answer, since it
// could not read a plain one.
//
// cpp-httplib, which this server used before, bounds none of these across a
// whole request: its read timeout is per recv(), its thread pool queue is
// unbounded, and version 0.11 does not limit chunked bodies.
//
// HttpGet is a blocking client for tests and tools (cpp-httplib).
//
// Thread-safety: register handlers before Start(); Start() and Stop() from one
// thread; handlers run concurrently on handler threads and must be thread-safe.
#ifndef GRANARY_COMMON_NET_HTTP_H_
#define GRANARY_COMMON_NET_HTTP_H_

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/net/http_request_parser.h"

namespace granary {

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

struct HttpServerOptions {
  size_t max_header_bytes = 16 << 10;
  size_t max_body_bytes = 1 << 20;
  size_t max_buffered_body_bytes = 8 << 20;
  size_t max_connections = 512;
  size_t handler_threads = 4;
  std::chrono::milliseconds request_timeout{10'000};
  std::chrono::milliseconds idle_timeout{15'000};
  std::chrono::milliseconds write_timeout{10'000};
  // PEM files of the certificate chain (leaf first) and its private key; both
  // or neither. Read once, by Start().
  std::string tls_certificate_file = {};
  std::string tls_key_file = {};
};

class HttpServer {
 public:
  using Handler = std::function<HttpResponse(const HttpRequest&)>;

  explicit HttpServer(HttpServerOptions options = {});
  ~HttpServer();  // Stops the server if it runs.
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // `method` is "GET" or "POST".
  void Handle(std::string_view method, std::string_view path, Handler handler);

  // Binds `host_port` ("HOST:PORT"; port 0 picks a free one) and serves in the
  // background. Fails naming the address when it is malformed or cannot be
  // bound, naming the option when an option is zero, and naming the file and
  // OpenSSL's reason when the certificate or key cannot be loaded or do not
  // belong together.
  absl::Status Start(std::string_view host_port);
  // The bound port, once started.
  int port() const { return port_; }
  void Stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

// GET http://host_port/path. Fails with UNAVAILABLE naming the address when it
// cannot connect, and with the status text on a non-2xx answer.
absl::StatusOr<std::string> HttpGet(std::string_view host_port, std::string_view path);

}  // namespace granary

#endif  // GRANARY_COMMON_NET_HTTP_H_
