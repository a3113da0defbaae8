#include "tests/support/sigv4_front_end.h"

#include <httplib.h>

#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/base/absl_compat.h"
#include "tests/support/sigv4_verifier.h"

namespace granary::testing {
namespace {

// Threads serving connections: one a connection while it is kept alive,
// and a granaryd keeps up to 32 open to an endpoint.
constexpr size_t kServingThreads = 160;
// How long a written object may take to be served whole.
constexpr auto kWrittenObjectDeadline = std::chrono::seconds(10);

std::string ErrorDocument(std::string_view code, std::string_view message) {
  return absl::StrCat("<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>", AsAbsl(code),
                      "</Code><Message>", AsAbsl(message), "</Message></Error>");
}

// `request` sent on to s3rver with `headers`, and its answer.
httplib::Result Forward(int backend_port, const httplib::Request& request,
                        const httplib::Headers& headers) {
  httplib::Client backend("127.0.0.1", backend_port);
  backend.set_url_encode(false);
  return request.method == "GET"      ? backend.Get(request.target, headers)
         : request.method == "DELETE" ? backend.Delete(request.target, headers)
         : request.method == "HEAD"   ? backend.Head(request.target, headers)
                                      : backend.Put(request.target, headers, request.body,
                                                    request.get_header_value("Content-Type"));
}

// Whether s3rver serves the object at `target` as `bytes` within the
// deadline: it answers a PUT before the object's data is surely written.
bool ServedWhole(int backend_port, const std::string& target, const std::string& bytes) {
  httplib::Client backend("127.0.0.1", backend_port);
  backend.set_url_encode(false);
  const auto deadline = std::chrono::steady_clock::now() + kWrittenObjectDeadline;
  while (true) {
    httplib::Result read = backend.Get(target);
    if (read && read->status == 200 && read->body == bytes) return true;
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace

SigV4FrontEnd::SigV4FrontEnd(int backend_port, Keys keys, std::string listen_address)
    : backend_port_(backend_port),
      keys_(std::move(keys)),
      listen_address_(std::move(listen_address)) {}

absl::StatusOr<std::unique_ptr<SigV4FrontEnd>> SigV4FrontEnd::Start(
    int backend_port, Keys keys, const std::string& listen_address) {
  std::unique_ptr<SigV4FrontEnd> front(
      new SigV4FrontEnd(backend_port, std::move(keys), listen_address));
  front->server_ = std::make_unique<httplib::Server>();
  front->server_->new_task_queue = [] { return new httplib::ThreadPool(kServingThreads); };
  SigV4FrontEnd* self = front.get();
  auto handler = [self](const httplib::Request& request, httplib::Response& response) {
    SignedRequest signed_request{request.method, request.target, {}, request.body};
    httplib::Headers forwarded;
    for (const auto& [name, value] : request.headers) {
      signed_request.headers.emplace_back(name, value);
      if (name != "Host" && name != "Content-Length" && name != "REMOTE_ADDR" &&
          name != "REMOTE_PORT" && name != "LOCAL_ADDR" && name != "LOCAL_PORT") {
        forwarded.emplace(name, value);
      }
    }
    if (std::optional<std::string> refusal = SigV4Refusal(signed_request, self->keys_.access_key,
                                                          self->keys_.secret, self->keys_.region)) {
      self->signature_refusals_.fetch_add(1);
      response.status = 403;
      response.set_content(ErrorDocument(*refusal, "refused by the SigV4 front end"),
                           "application/xml");
      return;
    }
    if (request.method == "GET") {
      const Requests kind = request.target.find("list-type=") == std::string::npos
                                ? Requests::kObjectGets
                                : Requests::kListings;
      if (std::optional<Failure> failure = self->TakeFailure(kind)) {
        response.status = failure->status;
        response.set_content(
            ErrorDocument(failure->code, "failed on purpose by the SigV4 front end"),
            "application/xml");
        return;
      }
      if (kind == Requests::kObjectGets) self->object_gets_.fetch_add(1);
    }
    // s3rver answers the Range itself; left in the request, httplib would
    // cut it out of that answer a second time.
    const_cast<httplib::Request&>(request).ranges.clear();
    const bool write = request.method == "PUT" || request.method == "DELETE";
    if (write) {
      self->BeginWrite();
    } else {
      self->BeginRead();
    }
    httplib::Result result = Forward(self->backend_port_, request, forwarded);
    bool written_whole = true;
    if (result && request.method == "PUT" && result->status / 100 == 2 &&
        request.target.find('?') == std::string::npos) {
      written_whole = ServedWhole(self->backend_port_, request.target, request.body);
    }
    if (write) {
      self->EndWrite();
    } else {
      self->EndRead();
    }
    if (!result) {
      response.status = 502;
      return;
    }
    if (!written_whole) {
      response.status = 500;
      response.set_content(
          ErrorDocument("InternalError", "s3rver did not serve the object written whole"),
          "application/xml");
      return;
    }
    const std::string if_match = request.get_header_value("If-Match");
    if (!if_match.empty() && result->status / 100 == 2 &&
        result->get_header_value("ETag") != if_match) {
      self->precondition_failures_.fetch_add(1);
      response.status = 412;
      response.set_content(
          ErrorDocument("PreconditionFailed",
                        "At least one of the pre-conditions you specified did not hold"),
          "application/xml");
      return;
    }
    response.status = result->status;
    for (const char* name : {"ETag", "Last-Modified", "Content-Range", "Accept-Ranges"}) {
      if (result->has_header(name)) response.set_header(name, result->get_header_value(name));
    }
    response.set_content(result->body, result->get_header_value("Content-Type"));
  };
  front->server_->Get(".*", handler);
  front->server_->Put(".*", handler);
  front->server_->Delete(".*", handler);
  front->port_ = front->server_->bind_to_any_port(listen_address);
  if (front->port_ < 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", listen_address));
  }
  front->thread_ = std::thread([self] { self->server_->listen_after_bind(); });
  return front;
}

SigV4FrontEnd::~SigV4FrontEnd() {
  server_->stop();
  if (thread_.joinable()) thread_.join();
}

void SigV4FrontEnd::FailNext(Requests kind, int count, int status, std::string code) {
  MutexLock lock(&mu_);
  failure_ = {.kind = kind, .remaining = count, .status = status, .code = std::move(code)};
}

std::optional<SigV4FrontEnd::Failure> SigV4FrontEnd::TakeFailure(Requests kind) {
  MutexLock lock(&mu_);
  if (failure_.kind != kind || failure_.remaining == 0) return std::nullopt;
  --failure_.remaining;
  failed_gets_.fetch_add(1);
  return failure_;
}

void SigV4FrontEnd::BeginRead() {
  MutexLock lock(&admission_mu_);
  while (writing_ || writes_waiting_ > 0) admission_changed_.Wait(&admission_mu_);
  ++reads_in_flight_;
}

void SigV4FrontEnd::EndRead() {
  MutexLock lock(&admission_mu_);
  if (--reads_in_flight_ == 0) admission_changed_.SignalAll();
}

void SigV4FrontEnd::BeginWrite() {
  MutexLock lock(&admission_mu_);
  ++writes_waiting_;
  while (writing_ || reads_in_flight_ > 0) admission_changed_.Wait(&admission_mu_);
  --writes_waiting_;
  writing_ = true;
}

void SigV4FrontEnd::EndWrite() {
  MutexLock lock(&admission_mu_);
  writing_ = false;
  admission_changed_.SignalAll();
}

std::string SigV4FrontEnd::endpoint() const {
  return absl::StrCat("http://", listen_address_, ":", port_);
}

}  // namespace granary::testing
