#include "tests/support/sigv4_front_end.h"

#include <httplib.h>

#include "absl/strings/str_cat.h"
#include "common/base/absl_compat.h"
#include "tests/support/granaryd_process.h"
#include "tests/support/sigv4_verifier.h"

namespace granary::testing {
namespace {

std::string ErrorDocument(std::string_view code, std::string_view message) {
  return absl::StrCat("<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>", AsAbsl(code),
                      "</Code><Message>", AsAbsl(message), "</Message></Error>");
}

}  // namespace

SigV4FrontEnd::SigV4FrontEnd(int backend_port, Keys keys)
    : backend_port_(backend_port), keys_(std::move(keys)) {}

absl::StatusOr<std::unique_ptr<SigV4FrontEnd>> SigV4FrontEnd::Start(int backend_port, Keys keys) {
  std::unique_ptr<SigV4FrontEnd> front(new SigV4FrontEnd(backend_port, std::move(keys)));
  front->server_ = std::make_unique<httplib::Server>();
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
    httplib::Client backend("127.0.0.1", self->backend_port_);
    backend.set_url_encode(false);
    httplib::Result result =
        request.method == "GET"      ? backend.Get(request.target, forwarded)
        : request.method == "DELETE" ? backend.Delete(request.target, forwarded)
        : request.method == "HEAD"   ? backend.Head(request.target, forwarded)
                                     : backend.Put(request.target, forwarded, request.body,
                                                   request.get_header_value("Content-Type"));
    if (!result) {
      response.status = 502;
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
  front->port_ = FreeTcpPort();
  if (!front->server_->bind_to_port("127.0.0.1", front->port_)) {
    return absl::UnavailableError(absl::StrCat("cannot listen on 127.0.0.1:", front->port_));
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

std::string SigV4FrontEnd::endpoint() const { return absl::StrCat("http://127.0.0.1:", port_); }

}  // namespace granary::testing
