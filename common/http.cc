#include "common/http.h"

#include <httplib.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/absl_compat.h"

namespace granary {

struct HttpServer::Impl {
  httplib::Server server;
};

HttpServer::HttpServer() : impl_(std::make_unique<Impl>()) {}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::Handle(std::string_view method, std::string_view path, Handler handler) {
  auto adapter = [handler = std::move(handler)](const httplib::Request& request,
                                                httplib::Response& response) {
    HttpResponse answer = handler(HttpRequest{request.method, request.path, request.body});
    response.status = answer.status;
    response.set_content(answer.body, answer.content_type.c_str());
  };
  std::string pattern(path);
  if (method == "POST") {
    impl_->server.Post(pattern, adapter);
  } else {
    impl_->server.Get(pattern, adapter);
  }
}

absl::Status SplitHostPort(std::string_view host_port, std::string* host, int* port) {
  size_t colon = host_port.rfind(':');
  if (colon == std::string_view::npos || colon == 0 ||
      !absl::SimpleAtoi(AsAbsl(host_port.substr(colon + 1)), port) || *port < 0 || *port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("address '", AsAbsl(host_port), "' is not HOST:PORT"));
  }
  host->assign(host_port.substr(0, colon));
  if (host->size() >= 2 && host->front() == '[' && host->back() == ']') {
    *host = host->substr(1, host->size() - 2);
  }
  return absl::OkStatus();
}

absl::Status HttpServer::Start(std::string_view host_port) {
  std::string host;
  int port = 0;
  if (absl::Status split = SplitHostPort(host_port, &host, &port); !split.ok()) return split;
  if (port == 0) {
    port = impl_->server.bind_to_any_port(host);
    if (port < 0) port = 0;
  } else if (!impl_->server.bind_to_port(host, port)) {
    port = 0;
  }
  if (port == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen for HTTP on ", AsAbsl(host_port), " (address in use?)"));
  }
  port_ = port;
  thread_ = std::thread([this] { impl_->server.listen_after_bind(); });
  return absl::OkStatus();
}

void HttpServer::Stop() {
  if (!thread_.joinable()) return;
  impl_->server.stop();
  thread_.join();
}

absl::StatusOr<std::string> HttpGet(std::string_view host_port, std::string_view path) {
  std::string host;
  int port = 0;
  if (absl::Status split = SplitHostPort(host_port, &host, &port); !split.ok()) return split;
  httplib::Client client(host, port);
  client.set_connection_timeout(5);
  client.set_read_timeout(30);
  httplib::Result result = client.Get(std::string(path));
  if (!result) {
    return absl::UnavailableError(absl::StrCat("GET http://", AsAbsl(host_port), AsAbsl(path), ": ",
                                               httplib::to_string(result.error())));
  }
  if (result->status < 200 || result->status >= 300) {
    return absl::UnavailableError(
        absl::StrCat("GET http://", AsAbsl(host_port), AsAbsl(path), ": HTTP ", result->status));
  }
  return result->body;
}

}  // namespace granary
