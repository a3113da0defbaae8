// SigV4FrontEnd stands before s3rver (which checks no signature and ignores
// If-Match) and does what S3 does with both, so that the S3 tests prove them
// against a server that checks: every request must be signed (SigV4, by the
// front end's one key, for its region) or is answered 403 with S3's error
// document, and a request with If-Match whose object's ETag is another is
// answered 412 PreconditionFailed (one that is gone, 404). Everything else is forwarded to s3rver
// as it came (the raw target, the headers, the body) and s3rver's answer
// returned. It counts the GETs of objects it forwards, so that a test sees
// how often the bucket was read.
//
// It serves HTTP/1.1 on a free loopback port from threads of its own.
//
// Thread-safety: the accessors may be called from any thread.
#ifndef GRANARY_TESTS_SUPPORT_SIGV4_FRONT_END_H_
#define GRANARY_TESTS_SUPPORT_SIGV4_FRONT_END_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

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

  // Forwards to 127.0.0.1:`backend_port`. UNAVAILABLE when it cannot listen.
  static absl::StatusOr<std::unique_ptr<SigV4FrontEnd>> Start(int backend_port, Keys keys);
  ~SigV4FrontEnd();
  SigV4FrontEnd(const SigV4FrontEnd&) = delete;
  SigV4FrontEnd& operator=(const SigV4FrontEnd&) = delete;

  // "http://127.0.0.1:<port>".
  std::string endpoint() const;
  // Requests refused for their signature, and answered 412.
  int signature_refusals() const { return signature_refusals_.load(); }
  int precondition_failures() const { return precondition_failures_.load(); }
  // Signed GETs of an object (ranged or whole; not listings) forwarded.
  int object_gets() const { return object_gets_.load(); }

 private:
  SigV4FrontEnd(int backend_port, Keys keys);

  const int backend_port_;
  const Keys keys_;
  int port_ = 0;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::atomic<int> signature_refusals_{0};
  std::atomic<int> precondition_failures_{0};
  std::atomic<int> object_gets_{0};
};

}  // namespace granary::testing

#endif  // GRANARY_TESTS_SUPPORT_SIGV4_FRONT_END_H_
