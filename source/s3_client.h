// S3Client speaks the two calls of S3's REST API that a dataset needs to one
// bucket of one endpoint: ListObjectsV2 (registration) and ranged GETs of
// objects held to a recorded ETag (reads). Requests are signed with AWS
// Signature Version 4 by libcurl (CURLOPT_AWS_SIGV4). libcurl 7.88 signs the
// URL exactly as written, so every URL is built here in its canonical form:
// the key's path percent-encoded (S3UriEncode, '/' kept), query parameters
// sorted by name with their values encoded, "name=" for an empty value.
//
// Connections are reused: a request takes an idle curl handle (each keeps
// its connections open) and gives it back. Requests in flight to one
// endpoint are bounded by its S3RequestSlots; others wait for a slot. A request that fails with
// a 5xx (503 SlowDown included), 429, a timeout or a refused or reset
// connection is retried, up to `attempts` times in all, after an
// exponential backoff with full jitter; each retry is logged with what
// failed, so that an endpoint slowing granaryd down shows in its log.
//
// Errors name the endpoint, the bucket and key, and the HTTP status with the
// server's error code: PERMISSION_DENIED for 401/403 (bad credentials or
// signature), NOT_FOUND for a missing bucket, FAILED_PRECONDITION for an
// object gone (404) or changed since its ETag was recorded (412, or a
// reply with another ETag: a read never mixes bytes of two versions),
// UNAVAILABLE or DEADLINE_EXCEEDED once the retries are spent.
//
// Thread-safety: all methods may be called concurrently.
#ifndef GRANARY_SOURCE_S3_CLIENT_H_
#define GRANARY_SOURCE_S3_CLIENT_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/base/mutex.h"
#include "common/source_access/s3_location.h"
#include "source/s3_credentials.h"
#include "source/s3_xml.h"

namespace granary {

// The URL of `key` of the location's bucket (`key` empty: the bucket
// itself) with `query` (name, value pairs, in any order) in the canonical
// form that is signed. Exposed for the test support that writes objects.
std::string S3RequestUrl(const S3Location& location, std::string_view key,
                         std::vector<std::pair<std::string, std::string>> query = {});

// How many requests may be in flight to one endpoint: every client of the
// endpoint takes a slot for each request and waits while none is free.
class S3RequestSlots {
 public:
  explicit S3RequestSlots(int slots) : free_(slots) {}
  void Take();
  void Give();

 private:
  Mutex mu_;
  CondVar freed_;
  int free_ ABSL_GUARDED_BY(mu_);
};

class S3Client {
 public:
  struct Options {
    int attempts = 4;
    std::chrono::milliseconds first_backoff{100};
    std::chrono::milliseconds connect_timeout{5000};
    std::chrono::milliseconds request_timeout{60000};
  };

  // `slots` (shared by the clients of one endpoint) must outlive the client.
  S3Client(S3Location location, S3Credentials credentials, S3RequestSlots* slots, Options options);
  ~S3Client();
  S3Client(const S3Client&) = delete;
  S3Client& operator=(const S3Client&) = delete;

  // One page of the keys under the location's prefix, after
  // `continuation_token` (empty: the first page).
  absl::StatusOr<S3ListPage> ListPage(const std::string& continuation_token) const;

  // Fills `out` with bytes [offset, offset + out.size()) of object `key`
  // (of `object_size` bytes), which must still have ETag `etag`. A range
  // that is the whole object is asked for without a Range header: some
  // servers answer "bytes=0-0" wrongly.
  absl::Status GetRange(std::string_view key, std::string_view etag, uint64_t object_size,
                        uint64_t offset, std::span<char> out) const;

  const S3Location& location() const { return location_; }

  struct Reply;  // One HTTP reply; defined where it is used, in the .cc.

 private:
  // Sends a GET of `url` with `headers`, retrying as the class comment
  // says; a successful body goes to `sink` when it is not empty (never past
  // its end), else to the reply.
  absl::StatusOr<Reply> Get(const std::string& url, const std::vector<std::string>& headers,
                            std::span<char> sink, std::string_view what) const;
  absl::StatusOr<Reply> GetOnce(void* curl, const std::string& url,
                                const std::vector<std::string>& headers,
                                std::span<char> sink) const;
  void* TakeHandle() const;
  void ReturnHandle(void* curl) const;

  const S3Location location_;
  const S3Credentials credentials_;
  S3RequestSlots* const slots_;
  const Options options_;
  const std::string sigv4_;  // "aws:amz:REGION:s3"

  mutable Mutex mu_;
  mutable std::vector<void*> idle_handles_ ABSL_GUARDED_BY(mu_);
};

}  // namespace granary

#endif  // GRANARY_SOURCE_S3_CLIENT_H_
