// A small HTTP/1.1 server and client for Granary's plain-text endpoints: the
// Prometheus metrics of granaryd and the Kubernetes scheduler extender. It wraps
// cpp-httplib so that only http.cc compiles that header.
//
// HttpServer serves registered (method, path) handlers from a background
// thread pool; requests to other paths get 404. HttpGet is a blocking client
// for tests and tools.
//
// Thread-safety: register handlers before Start(); Start() and Stop() from one
// thread; handlers run concurrently on server threads and must be thread-safe.
#ifndef GRANARY_COMMON_HTTP_H_
#define GRANARY_COMMON_HTTP_H_

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace granary {

struct HttpRequest {
  std::string method;
  std::string path;
  std::string body;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

class HttpServer {
 public:
  using Handler = std::function<HttpResponse(const HttpRequest&)>;

  HttpServer();
  ~HttpServer();  // Stops the server if it runs.
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // `method` is "GET" or "POST".
  void Handle(std::string_view method, std::string_view path, Handler handler);

  // Binds `host_port` ("HOST:PORT"; port 0 picks a free one) and serves in the
  // background. Fails naming the address when it is malformed or cannot be bound.
  absl::Status Start(std::string_view host_port);
  // The bound port, once started.
  int port() const { return port_; }
  void Stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::thread thread_;
  int port_ = 0;
};

// GET http://host_port/path. Fails with UNAVAILABLE naming the address when it
// cannot connect, and with the status text on a non-2xx answer.
absl::StatusOr<std::string> HttpGet(std::string_view host_port, std::string_view path);

// Splits "HOST:PORT"; fails with INVALID_ARGUMENT naming the text otherwise.
absl::Status SplitHostPort(std::string_view host_port, std::string* host, int* port);

}  // namespace granary

#endif  // GRANARY_COMMON_HTTP_H_
