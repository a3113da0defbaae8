// SigV4FrontEnd stands before s3rver (which checks no signature and ignores
// If-Match) and does what S3 does with both, so that the S3 tests prove them
// against a server that checks: every request must be signed (SigV4, by the
// front end's one key, for its region) or is answered 403 with S3's error
// document, and a request with If-Match whose object's ETag is another is
// answered 412 PreconditionFailed (one that is gone, 404). Everything else is forwarded to s3rver
// as it came (the raw target, the headers, the body) and s3rver's answer
// returned. It counts the GETs of objects it forwards, so that a test sees
// how often the bucket was read. A test may have it answer the next signed
// GETs of one kind with an error of S3's (503 SlowDown, 500 InternalError)
// instead, as a loaded S3 does, to see them retried.
//
// A PUT or DELETE through it is atomic, as S3's are: s3rver writes an
// object in place, its data and then its metadata, so a GET racing the
// write could read the old ETag with part of the new bytes. The front end
// forwards a write only when no other request is in flight, holds every
// request back while it is, and answers it once s3rver serves the object
// it wrote whole (its bytes, read back). A write waiting holds new requests
// back, so that a bucket read without pause is still written.
//
// It serves HTTP/1.1 on a free port of the address it is given (loopback by
// default) from threads of its own, enough to keep every connection of
// several granaryd open (each keeps up to 32 to an endpoint).
//
// Thread-safety: the accessors may be called from any thread.
#ifndef GRANARY_TESTS_SUPPORT_SIGV4_FRONT_END_H_
#define GRANARY_TESTS_SUPPORT_SIGV4_FRONT_END_H_

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "common/base/mutex.h"

namespace httplib {
class Server;
}  // namespace httplib

namespace granary::testing {

class SigV4FrontEnd {
 public:
  struct Keys {
    std::string access_key;
    std::string secret;
    std::string region = "us-east-1";
  };

  // The GETs a test may have answered with an error.
  enum class Requests { kObjectGets, kListings };

  // Forwards to 127.0.0.1:`backend_port`; listens on `listen_address`, an
  // IPv4 address of this host. UNAVAILABLE when it cannot listen there.
  static absl::StatusOr<std::unique_ptr<SigV4FrontEnd>> Start(
      int backend_port, Keys keys, const std::string& listen_address = "127.0.0.1");
  ~SigV4FrontEnd();
  SigV4FrontEnd(const SigV4FrontEnd&) = delete;
  SigV4FrontEnd& operator=(const SigV4FrontEnd&) = delete;

  // "http://<listen address>:<port>".
  std::string endpoint() const;
  // Requests refused for their signature, and answered 412.
  int signature_refusals() const { return signature_refusals_.load(); }
  int precondition_failures() const { return precondition_failures_.load(); }
  // Signed GETs of an object (ranged or whole; not listings) forwarded.
  int object_gets() const { return object_gets_.load(); }

  // Answers the next `count` signed GETs of `kind` HTTP `status` with S3's
  // error document of `code`, in place of what was asked for earlier (a
  // `count` of 0 forwards them all again).
  void FailNext(Requests kind, int count, int status, std::string code);
  // GETs answered so, since the front end started.
  int failed_gets() const { return failed_gets_.load(); }

 private:
  SigV4FrontEnd(int backend_port, Keys keys, std::string listen_address);

  // Admits requests: reads together, a write alone (see the top).
  void BeginRead();
  void EndRead();
  void BeginWrite();
  void EndWrite();

  struct Failure {
    Requests kind = Requests::kObjectGets;
    int remaining = 0;
    int status = 0;
    std::string code;
  };
  // The failure a GET of `kind` is to be answered with, if any, counted
  // as answered.
  std::optional<Failure> TakeFailure(Requests kind);

  const int backend_port_;
  const Keys keys_;
  const std::string listen_address_;
  int port_ = 0;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::atomic<int> signature_refusals_{0};
  std::atomic<int> precondition_failures_{0};
  std::atomic<int> object_gets_{0};
  std::atomic<int> failed_gets_{0};
  Mutex mu_;
  Failure failure_ ABSL_GUARDED_BY(mu_);
  Mutex admission_mu_;
  CondVar admission_changed_;
  int reads_in_flight_ ABSL_GUARDED_BY(admission_mu_) = 0;
  int writes_waiting_ ABSL_GUARDED_BY(admission_mu_) = 0;
  bool writing_ ABSL_GUARDED_BY(admission_mu_) = false;
};

}  // namespace granary::testing

#endif  // GRANARY_TESTS_SUPPORT_SIGV4_FRONT_END_H_
