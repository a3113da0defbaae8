#include "common/net/http.h"

#include <errno.h>
#include <httplib.h>
#include <netdb.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <deque>
#include <map>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/base/absl_compat.h"
#include "common/base/logging.h"
#include "common/base/mutex.h"
#include "common/net/server_address.h"

namespace granary {
namespace {

using Clock = std::chrono::steady_clock;

// Epoll tags of the two descriptors that are not connections.
constexpr uint64_t kListenTag = 0;
constexpr uint64_t kWakeTag = 1;
constexpr uint64_t kFirstConnectionId = 2;
// After its final answer a connection still reads (and drops) what the
// client is sending, so that closing does not reset the connection before the
// client has read the answer (RFC 9112 9.6).
constexpr std::chrono::milliseconds kLingerTime{2000};
// How long accepting pauses when the process is out of descriptors.
constexpr std::chrono::milliseconds kAcceptBackoff{100};
constexpr size_t kReadBufferBytes = 64 << 10;

const char* ReasonPhrase(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 413:
      return "Content Too Large";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return status < 400 ? "OK" : "Error";
  }
}

std::string Serialize(const HttpResponse& response, bool keep_alive) {
  return absl::StrCat(
      "HTTP/1.1 ", response.status, " ", ReasonPhrase(response.status),
      "\r\nContent-Type: ", response.content_type, "\r\nContent-Length: ", response.body.size(),
      "\r\nConnection: ", keep_alive ? "keep-alive" : "close", "\r\n\r\n", response.body);
}

HttpResponse Refusal(int status, std::string_view message) {
  return HttpResponse{status, "text/plain; charset=utf-8", absl::StrCat(AsAbsl(message), "\n")};
}

struct SslFree {
  void operator()(SSL* ssl) const { SSL_free(ssl); }
};
struct SslContextFree {
  void operator()(SSL_CTX* context) const { SSL_CTX_free(context); }
};
using SslContext = std::unique_ptr<SSL_CTX, SslContextFree>;

// OpenSSL's reason for the failure just seen on this thread, or `fallback`;
// clears the thread's error queue.
std::string TakeTlsError(std::string_view fallback) {
  const unsigned long code = ERR_peek_last_error();
  ERR_clear_error();
  if (code == 0) return std::string(fallback);
  char text[256];
  ERR_error_string_n(code, text, sizeof(text));
  return text;
}

// The TLS context of `options`, or null when they ask for none.
absl::StatusOr<SslContext> MakeTlsContext(const HttpServerOptions& options) {
  if (options.tls_certificate_file.empty() && options.tls_key_file.empty()) return nullptr;
  if (options.tls_certificate_file.empty() || options.tls_key_file.empty()) {
    return absl::InvalidArgumentError(
        "HTTP server options tls_certificate_file and tls_key_file must be set together");
  }
  SslContext context(SSL_CTX_new(TLS_server_method()));
  if (context == nullptr) {
    return absl::InternalError(TakeTlsError("cannot create a TLS context"));
  }
  SSL_CTX_set_min_proto_version(context.get(), TLS1_2_VERSION);
  // Most clients close without a close_notify, and requests are framed by
  // HTTP itself: an end of stream is a close, not an error to log.
  SSL_CTX_set_options(context.get(), SSL_OP_IGNORE_UNEXPECTED_EOF);
  // Write() hands SSL_write what is left of the answer, wherever the last
  // partial write stopped.
  SSL_CTX_set_mode(context.get(),
                   SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  if (SSL_CTX_use_certificate_chain_file(context.get(), options.tls_certificate_file.c_str()) !=
      1) {
    return absl::InvalidArgumentError(absl::StrCat("cannot load the TLS certificate chain ",
                                                   options.tls_certificate_file, ": ",
                                                   TakeTlsError("not a PEM certificate")));
  }
  // Checked against the certificate loaded above, so a key of another
  // certificate fails here.
  if (SSL_CTX_use_PrivateKey_file(context.get(), options.tls_key_file.c_str(), SSL_FILETYPE_PEM) !=
      1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot load the TLS private key ", options.tls_key_file, " of the certificate ",
        options.tls_certificate_file, ": ", TakeTlsError("not a PEM private key")));
  }
  return context;
}

absl::Status OptionsValid(const HttpServerOptions& options) {
  for (auto [value, name] :
       {std::pair{options.max_header_bytes, "max_header_bytes"},
        std::pair{options.max_body_bytes, "max_body_bytes"},
        std::pair{options.max_buffered_body_bytes, "max_buffered_body_bytes"},
        std::pair{options.max_connections, "max_connections"},
        std::pair{options.handler_threads, "handler_threads"},
        std::pair{static_cast<size_t>(options.request_timeout.count()), "request_timeout"},
        std::pair{static_cast<size_t>(options.idle_timeout.count()), "idle_timeout"},
        std::pair{static_cast<size_t>(options.write_timeout.count()), "write_timeout"}}) {
    if (value == 0) {
      return absl::InvalidArgumentError(absl::StrCat("HTTP server option ", name, " is 0"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

struct HttpServer::Impl {
  enum class State { kReading, kHandling, kWriting, kLingering };
  // The outcome of one read or write on a connection.
  enum class Io { kDone, kWait, kClosed, kPlainHttp };

  struct Connection {
    int fd = -1;
    uint64_t id = 0;
    State state = State::kReading;
    bool watched = false;
    std::optional<HttpRequestParser> parser;
    bool request_started = false;
    Clock::time_point deadline;
    std::string pending;  // Bytes read past the request being handled.
    std::string out;
    size_t out_sent = 0;
    bool close_after_write = false;
    uint64_t reserved_body_bytes = 0;
    bool continue_sent = false;
    std::unique_ptr<SSL, SslFree> tls;  // Null for plain HTTP.
    uint32_t tls_waits_for = EPOLLIN;   // What the last TLS call that could not go on needs.
  };

  struct Job {
    uint64_t id;
    const Handler* handler;
    HttpRequest request;
  };

  explicit Impl(HttpServerOptions options) : options(options) {}

  // Runs on the loop thread.
  void Loop();
  void AcceptAll();
  void OnEvent(Connection& connection, uint32_t events);
  void ReadInput(Connection& connection);
  Io Receive(Connection& connection, size_t* got);
  Io Send(Connection& connection, std::string_view bytes, size_t* sent);
  Io TlsOutcome(Connection& connection, int result);
  void Consume(Connection& connection, std::string_view input);
  void StartRequest(Connection& connection);
  void Answer(Connection& connection, const HttpResponse& response, bool keep_alive);
  void Write(Connection& connection);
  void Linger(Connection& connection);
  void Watch(Connection& connection, uint32_t events);
  void Unwatch(Connection& connection);
  void Close(Connection& connection);
  void Release(Connection& connection);
  void CollectAnswers();
  void ExpireDeadlines();
  int WaitMillis() const;

  // Runs on the handler threads.
  void HandleRequests();

  const HttpServerOptions options;
  absl::flat_hash_map<std::string, std::map<std::string, Handler>> routes;  // path -> method ->
  int listen_fd = -1;
  int epoll_fd = -1;
  int wake_fd = -1;
  SslContext tls_context;  // Null for plain HTTP.
  std::thread loop_thread;
  std::vector<std::thread> handler_threads;

  // Loop thread only.
  absl::flat_hash_map<uint64_t, std::unique_ptr<Connection>> connections;
  std::vector<uint64_t> closed;
  std::vector<uint64_t> resumable;  // Reading, with pipelined bytes pending.
  uint64_t next_id = kFirstConnectionId;
  uint64_t buffered_body_bytes = 0;
  std::optional<Clock::time_point> accept_paused_until;
  std::string read_buffer = std::string(kReadBufferBytes, '\0');

  Mutex mutex;
  CondVar work;
  std::deque<Job> jobs ABSL_GUARDED_BY(mutex);
  std::vector<std::pair<uint64_t, HttpResponse>> answers ABSL_GUARDED_BY(mutex);
  bool stopping ABSL_GUARDED_BY(mutex) = false;
};

void HttpServer::Impl::Watch(Connection& connection, uint32_t events) {
  epoll_event event{};
  event.events = events;
  event.data.u64 = connection.id;
  ::epoll_ctl(epoll_fd, connection.watched ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, connection.fd, &event);
  connection.watched = true;
}

void HttpServer::Impl::Unwatch(Connection& connection) {
  if (!connection.watched) return;
  ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, connection.fd, nullptr);
  connection.watched = false;
}

void HttpServer::Impl::Release(Connection& connection) {
  buffered_body_bytes -= connection.reserved_body_bytes;
  connection.reserved_body_bytes = 0;
}

void HttpServer::Impl::Close(Connection& connection) {
  if (connection.fd < 0) return;
  Release(connection);
  Unwatch(connection);
  ::close(connection.fd);
  connection.fd = -1;
  closed.push_back(connection.id);
}

void HttpServer::Impl::StartRequest(Connection& connection) {
  connection.state = State::kReading;
  connection.parser.emplace(HttpParserLimits{options.max_header_bytes, options.max_body_bytes});
  connection.request_started = false;
  connection.continue_sent = false;
  connection.deadline = Clock::now() + options.idle_timeout;
  Watch(connection, EPOLLIN | EPOLLRDHUP);
  // Pipelined bytes are taken up by the loop, not here, so that a run of
  // pipelined requests answered at once does not recurse. Bytes TLS has
  // decrypted but not handed out raise no event either.
  if (!connection.pending.empty() ||
      (connection.tls != nullptr && SSL_pending(connection.tls.get()) > 0)) {
    resumable.push_back(connection.id);
  }
}

void HttpServer::Impl::AcceptAll() {
  while (true) {
    int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        GRANARY_LOG(WARNING) << "HTTP server cannot accept (" << std::strerror(errno)
                             << "); pausing for " << kAcceptBackoff.count() << " ms";
        accept_paused_until = Clock::now() + kAcceptBackoff;
        epoll_event event{};
        event.data.u64 = kListenTag;
        ::epoll_ctl(epoll_fd, EPOLL_CTL_MOD, listen_fd, &event);
      }
      return;
    }
    if (connections.size() >= options.max_connections) {
      if (tls_context == nullptr) {
        std::string refusal = Serialize(
            Refusal(503, absl::StrCat("the server holds its limit of ", options.max_connections,
                                      " connections; retry later")),
            /*keep_alive=*/false);
        (void)!::send(fd, refusal.data(), refusal.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      }
      ::close(fd);
      continue;
    }
    auto connection = std::make_unique<Connection>();
    if (tls_context != nullptr) {
      connection->tls.reset(SSL_new(tls_context.get()));
      if (connection->tls == nullptr || SSL_set_fd(connection->tls.get(), fd) != 1) {
        GRANARY_LOG(WARNING) << "HTTPS server cannot start TLS on a connection: "
                             << TakeTlsError("out of memory");
        ::close(fd);
        continue;
      }
      SSL_set_accept_state(connection->tls.get());
    }
    connection->fd = fd;
    connection->id = next_id++;
    Connection& added = *connection;
    connections.emplace(added.id, std::move(connection));
    StartRequest(added);
    // A new connection is held to the request deadline from the start, not
    // to the longer idle time allowed between requests.
    added.deadline = Clock::now() + options.request_timeout;
  }
}

void HttpServer::Impl::OnEvent(Connection& connection, uint32_t events) {
  if (connection.fd < 0) return;
  if (connection.state == State::kWriting) {
    if (events & (EPOLLERR | EPOLLHUP)) return Close(connection);
    return Write(connection);
  }
  ReadInput(connection);
}

HttpServer::Impl::Io HttpServer::Impl::TlsOutcome(Connection& connection, int result) {
  SSL* tls = connection.tls.get();
  switch (SSL_get_error(tls, result)) {
    case SSL_ERROR_WANT_READ:
      connection.tls_waits_for = EPOLLIN;
      return Io::kWait;
    case SSL_ERROR_WANT_WRITE:
      connection.tls_waits_for = EPOLLOUT;
      return Io::kWait;
    case SSL_ERROR_SSL:
      if (ERR_GET_REASON(ERR_peek_error()) == SSL_R_HTTP_REQUEST) {
        ERR_clear_error();
        return Io::kPlainHttp;
      }
      if (!SSL_is_init_finished(tls)) {
        GRANARY_LOG(WARNING) << "TLS handshake with an HTTPS client failed: "
                             << TakeTlsError("no reason given");
      }
      ERR_clear_error();
      return Io::kClosed;
    default:  // The peer closed or reset the connection.
      ERR_clear_error();
      return Io::kClosed;
  }
}

HttpServer::Impl::Io HttpServer::Impl::Receive(Connection& connection, size_t* got) {
  if (connection.tls != nullptr) {
    ERR_clear_error();
    int read =
        SSL_read(connection.tls.get(), read_buffer.data(), static_cast<int>(read_buffer.size()));
    if (read <= 0) return TlsOutcome(connection, read);
    *got = static_cast<size_t>(read);
    return Io::kDone;
  }
  while (true) {
    ssize_t read = ::recv(connection.fd, read_buffer.data(), read_buffer.size(), 0);
    if (read < 0 && errno == EINTR) continue;
    if (read < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return Io::kWait;
    if (read <= 0) return Io::kClosed;
    *got = static_cast<size_t>(read);
    return Io::kDone;
  }
}

HttpServer::Impl::Io HttpServer::Impl::Send(Connection& connection, std::string_view bytes,
                                            size_t* sent) {
  if (connection.tls != nullptr) {
    ERR_clear_error();
    int written = SSL_write(connection.tls.get(), bytes.data(),
                            static_cast<int>(std::min<size_t>(bytes.size(), INT32_MAX)));
    if (written <= 0) return TlsOutcome(connection, written);
    *sent = static_cast<size_t>(written);
    return Io::kDone;
  }
  while (true) {
    ssize_t written = ::send(connection.fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (written < 0 && errno == EINTR) continue;
    if (written < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return Io::kWait;
    if (written < 0) return Io::kClosed;
    *sent = static_cast<size_t>(written);
    return Io::kDone;
  }
}

void HttpServer::Impl::ReadInput(Connection& connection) {
  while (connection.fd >= 0 &&
         (connection.state == State::kReading || connection.state == State::kLingering)) {
    size_t got = 0;
    switch (Receive(connection, &got)) {
      case Io::kDone:
        break;
      case Io::kWait:
        // A TLS read may first have to write (a handshake message); the
        // readiness to wait for is then the socket's, not the request's.
        if (connection.tls != nullptr) {
          uint32_t events = EPOLLIN | EPOLLRDHUP;
          if (connection.tls_waits_for == EPOLLOUT) events |= EPOLLOUT;
          Watch(connection, events);
        }
        return;
      case Io::kClosed:
        return Close(connection);
      case Io::kPlainHttp:
        // Answered in plain text, which is what the client can read.
        connection.tls.reset();
        return Answer(connection,
                      Refusal(400, "this port speaks HTTPS; the request came as plain HTTP"),
                      /*keep_alive=*/false);
    }
    if (connection.state == State::kLingering) continue;
    Consume(connection, std::string_view(read_buffer.data(), got));
  }
}

void HttpServer::Impl::Consume(Connection& connection, std::string_view input) {
  if (!connection.request_started) {
    connection.request_started = true;
    connection.deadline = Clock::now() + options.request_timeout;
  }
  HttpRequestParser& parser = *connection.parser;
  HttpRequestParser::Step step = parser.Consume(input);
  if (step == HttpRequestParser::Step::kRefused) {
    return Answer(connection, Refusal(parser.refusal_status(), parser.refusal_message()),
                  /*keep_alive=*/false);
  }
  if (parser.body_bytes_announced() > connection.reserved_body_bytes) {
    uint64_t more = parser.body_bytes_announced() - connection.reserved_body_bytes;
    if (buffered_body_bytes + more > options.max_buffered_body_bytes) {
      return Answer(connection,
                    Refusal(503, absl::StrCat("the server is buffering its limit of ",
                                              options.max_buffered_body_bytes,
                                              " bytes of request bodies; retry later")),
                    /*keep_alive=*/false);
    }
    buffered_body_bytes += more;
    connection.reserved_body_bytes += more;
  }
  if (step == HttpRequestParser::Step::kNeedMore) {
    if (parser.headers_complete() && parser.expects_continue() && !connection.continue_sent) {
      connection.continue_sent = true;
      constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      size_t sent = 0;
      if (Send(connection, kContinue, &sent) != Io::kDone || sent != kContinue.size()) {
        Close(connection);
      }
    }
    return;
  }
  connection.pending.assign(input);
  HttpRequest request = parser.TakeRequest();
  auto route = routes.find(request.path);
  if (route == routes.end()) {
    return Answer(connection, Refusal(404, absl::StrCat("no such path: ", request.path)),
                  parser.keep_alive());
  }
  auto handler = route->second.find(request.method);
  if (handler == route->second.end()) {
    return Answer(connection,
                  Refusal(405, absl::StrCat(request.method, " is not served on ", request.path)),
                  parser.keep_alive());
  }
  connection.state = State::kHandling;
  Unwatch(connection);
  {
    MutexLock lock(&mutex);
    jobs.push_back(Job{connection.id, &handler->second, std::move(request)});
  }
  work.Signal();
}

void HttpServer::Impl::Answer(Connection& connection, const HttpResponse& response,
                              bool keep_alive) {
  Release(connection);
  connection.state = State::kWriting;
  connection.close_after_write = !keep_alive;
  connection.out = Serialize(response, keep_alive);
  connection.out_sent = 0;
  connection.deadline = Clock::now() + options.write_timeout;
  Write(connection);
}

void HttpServer::Impl::Write(Connection& connection) {
  while (connection.out_sent < connection.out.size()) {
    size_t sent = 0;
    switch (Send(connection, std::string_view(connection.out).substr(connection.out_sent), &sent)) {
      case Io::kDone:
        connection.out_sent += sent;
        break;
      case Io::kWait:
        return Watch(connection, connection.tls != nullptr && connection.tls_waits_for == EPOLLIN
                                     ? EPOLLIN
                                     : EPOLLOUT);
      case Io::kClosed:
      case Io::kPlainHttp:
        return Close(connection);
    }
  }
  connection.out = std::string();
  if (connection.close_after_write) return Linger(connection);
  StartRequest(connection);
}

void HttpServer::Impl::Linger(Connection& connection) {
  if (connection.tls != nullptr) {
    // close_notify, so that the client knows the answer was not cut short.
    ERR_clear_error();
    SSL_shutdown(connection.tls.get());
    ERR_clear_error();
  }
  ::shutdown(connection.fd, SHUT_WR);
  connection.state = State::kLingering;
  connection.pending.clear();
  connection.deadline = Clock::now() + std::min(kLingerTime, options.request_timeout);
  Watch(connection, EPOLLIN | EPOLLRDHUP);
  ReadInput(connection);
}

void HttpServer::Impl::CollectAnswers() {
  uint64_t ignored;
  (void)!::read(wake_fd, &ignored, sizeof(ignored));
  std::vector<std::pair<uint64_t, HttpResponse>> ready;
  {
    MutexLock lock(&mutex);
    ready.swap(answers);
  }
  for (auto& [id, response] : ready) {
    auto connection = connections.find(id);
    if (connection == connections.end() || connection->second->fd < 0) continue;
    Connection& answered = *connection->second;
    Answer(answered, response, answered.parser->keep_alive());
  }
}

void HttpServer::Impl::ExpireDeadlines() {
  const Clock::time_point now = Clock::now();
  for (auto& [id, connection] : connections) {
    if (connection->fd < 0 || connection->state == State::kHandling || connection->deadline > now) {
      continue;
    }
    if (connection->state == State::kReading && connection->request_started) {
      Answer(*connection,
             Refusal(408, absl::StrCat("the request did not arrive whole within the limit of ",
                                       options.request_timeout.count(), " ms")),
             /*keep_alive=*/false);
    } else {
      Close(*connection);
    }
  }
}

int HttpServer::Impl::WaitMillis() const {
  Clock::time_point next = Clock::now() + std::chrono::seconds(1);
  for (const auto& [id, connection] : connections) {
    if (connection->state != State::kHandling) next = std::min(next, connection->deadline);
  }
  if (accept_paused_until) next = std::min(next, *accept_paused_until);
  auto wait = std::chrono::ceil<std::chrono::milliseconds>(next - Clock::now());
  return static_cast<int>(std::max<int64_t>(0, wait.count()));
}

void HttpServer::Impl::Loop() {
  std::vector<epoll_event> events(256);
  while (true) {
    {
      MutexLock lock(&mutex);
      if (stopping) break;
    }
    int ready =
        ::epoll_wait(epoll_fd, events.data(), static_cast<int>(events.size()), WaitMillis());
    for (int i = 0; i < ready; ++i) {
      const uint64_t tag = events[i].data.u64;
      if (tag == kListenTag) {
        AcceptAll();
      } else if (tag == kWakeTag) {
        CollectAnswers();
      } else if (auto connection = connections.find(tag); connection != connections.end()) {
        OnEvent(*connection->second, events[i].events);
      }
    }
    while (!resumable.empty()) {
      uint64_t id = resumable.back();
      resumable.pop_back();
      auto connection = connections.find(id);
      if (connection == connections.end()) continue;
      Connection& resumed = *connection->second;
      if (resumed.fd >= 0 && resumed.state == State::kReading && !resumed.pending.empty()) {
        Consume(resumed, std::exchange(resumed.pending, {}));
      }
      if (resumed.fd >= 0 && resumed.state == State::kReading && resumed.tls != nullptr) {
        ReadInput(resumed);
      }
    }
    ExpireDeadlines();
    for (uint64_t id : closed) connections.erase(id);
    closed.clear();
    if (accept_paused_until && Clock::now() >= *accept_paused_until) {
      accept_paused_until.reset();
      epoll_event event{};
      event.events = EPOLLIN;
      event.data.u64 = kListenTag;
      ::epoll_ctl(epoll_fd, EPOLL_CTL_MOD, listen_fd, &event);
    }
  }
  for (auto& [id, connection] : connections) Close(*connection);
  connections.clear();
}

void HttpServer::Impl::HandleRequests() {
  while (true) {
    Job job;
    {
      MutexLock lock(&mutex);
      while (!stopping && jobs.empty()) work.Wait(&mutex);
      if (stopping) return;
      job = std::move(jobs.front());
      jobs.pop_front();
    }
    HttpResponse response;
    try {
      response = (*job.handler)(job.request);
    } catch (const std::exception& error) {
      GRANARY_LOG(ERROR) << job.request.method << " " << job.request.path << ": " << error.what();
      response = Refusal(500, "the handler failed");
    }
    {
      MutexLock lock(&mutex);
      answers.emplace_back(job.id, std::move(response));
    }
    const uint64_t one = 1;
    (void)!::write(wake_fd, &one, sizeof(one));
  }
}

HttpServer::HttpServer(HttpServerOptions options) : impl_(std::make_unique<Impl>(options)) {}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::Handle(std::string_view method, std::string_view path, Handler handler) {
  impl_->routes[std::string(path)][std::string(method)] = std::move(handler);
}

namespace {

// A listening socket bound to host:port, or -1.
int Listen(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* addresses = nullptr;
  std::string service = std::to_string(port);
  if (::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &addresses) !=
      0) {
    return -1;
  }
  int fd = -1;
  for (addrinfo* address = addresses; address != nullptr && fd < 0; address = address->ai_next) {
    fd = ::socket(address->ai_family, address->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                  address->ai_protocol);
    if (fd < 0) continue;
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, address->ai_addr, address->ai_addrlen) != 0 || ::listen(fd, SOMAXCONN) != 0) {
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(addresses);
  return fd;
}

int BoundPort(int fd) {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) return 0;
  if (address.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<sockaddr_in6*>(&address)->sin6_port);
  }
  return ntohs(reinterpret_cast<sockaddr_in*>(&address)->sin_port);
}

}  // namespace

absl::Status HttpServer::Start(std::string_view host_port) {
  if (absl::Status valid = OptionsValid(impl_->options); !valid.ok()) return valid;
  absl::StatusOr<SslContext> tls_context = MakeTlsContext(impl_->options);
  if (!tls_context.ok()) return tls_context.status();
  impl_->tls_context = *std::move(tls_context);
  if (impl_->tls_context != nullptr) {
    // OpenSSL writes to the socket with write(2), which raises SIGPIPE on a
    // connection the client has closed; that must not end the process.
    ::signal(SIGPIPE, SIG_IGN);
  }
  std::string host;
  int port = 0;
  if (absl::Status split = SplitHostPort(host_port, &host, &port); !split.ok()) return split;
  impl_->listen_fd = Listen(host, port);
  if (impl_->listen_fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen for HTTP on ", AsAbsl(host_port), " (address in use?)"));
  }
  port_ = BoundPort(impl_->listen_fd);
  impl_->epoll_fd = ::epoll_create1(EPOLL_CLOEXEC);
  impl_->wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (impl_->epoll_fd < 0 || impl_->wake_fd < 0) {
    return absl::InternalError(
        absl::StrCat("HTTP server on ", AsAbsl(host_port),
                     ": cannot create its event loop: ", std::strerror(errno)));
  }
  for (auto [fd, tag] :
       {std::pair{impl_->listen_fd, kListenTag}, std::pair{impl_->wake_fd, kWakeTag}}) {
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.u64 = tag;
    ::epoll_ctl(impl_->epoll_fd, EPOLL_CTL_ADD, fd, &event);
  }
  for (size_t i = 0; i < impl_->options.handler_threads; ++i) {
    impl_->handler_threads.emplace_back([this] { impl_->HandleRequests(); });
  }
  impl_->loop_thread = std::thread([this] { impl_->Loop(); });
  return absl::OkStatus();
}

void HttpServer::Stop() {
  if (impl_->listen_fd < 0) return;
  {
    MutexLock lock(&impl_->mutex);
    impl_->stopping = true;
  }
  impl_->work.SignalAll();
  const uint64_t one = 1;
  (void)!::write(impl_->wake_fd, &one, sizeof(one));
  if (impl_->loop_thread.joinable()) impl_->loop_thread.join();
  for (std::thread& thread : impl_->handler_threads) thread.join();
  impl_->handler_threads.clear();
  for (int* fd : {&impl_->listen_fd, &impl_->epoll_fd, &impl_->wake_fd}) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
  }
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
