// OpenedSources opens the Source (source.h) that a dataset's source string
// names, and keeps it so that reads of a dataset reuse their connections: a
// POSIX directory (posix_source.h) or an S3 bucket (s3_source.h). An S3
// source is signed with the keys FindS3Credentials finds
// (s3_credentials.h) for the profile its source string names, else for its
// endpoint's profile in `s3_endpoint_profiles`, else for no profile (the
// environment first). Requests in flight to one endpoint are bounded
// together (S3RequestSlots), whichever dataset they are for.
//
// It decides nothing about which sources may be read; its users do:
// granaryd confines registration to its source roots and S3 endpoints
// (cache_server/access/sources.h), and granary-fuse reads only the sources of the
// catalog records its granaryd sent (fuse_client/read_path/source_file.h).
//
// Thread-safety: all methods are safe to call concurrently.
#ifndef GRANARY_SOURCE_OPENED_SOURCES_H_
#define GRANARY_SOURCE_OPENED_SOURCES_H_

#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/base/mutex.h"
#include "source/s3_client.h"
#include "source/source.h"

namespace granary {

class OpenedSources {
 public:
  struct Options {
    int scan_threads = 8;
    // Requests in flight to one S3 endpoint.
    int s3_requests_per_endpoint = 32;
    // Endpoint, in its canonical form (CanonicalS3Endpoint), to profile name.
    std::map<std::string, std::string> s3_endpoint_profiles;
    S3Client::Options s3;
  };

  explicit OpenedSources(Options options) : options_(std::move(options)) {}
  OpenedSources(const OpenedSources&) = delete;
  OpenedSources& operator=(const OpenedSources&) = delete;

  // The source opened afresh (so an S3 source signs with the keys found
  // now); it replaces the one kept. INVALID_ARGUMENT naming what is wrong
  // with a malformed source string; FAILED_PRECONDITION (or
  // INVALID_ARGUMENT) naming the endpoint, the profile and where it looked
  // when no keys are found for an S3 source.
  absl::StatusOr<std::shared_ptr<const Source>> Reopen(std::string_view source);
  // The source kept, else opened (and kept); errors as Reopen().
  absl::StatusOr<std::shared_ptr<const Source>> Get(std::string_view source);

 private:
  absl::StatusOr<std::shared_ptr<const Source>> Open(std::string_view source);

  const Options options_;

  Mutex mu_;
  std::map<std::string, std::shared_ptr<const Source>, std::less<>> kept_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::unique_ptr<S3RequestSlots>> slots_
      ABSL_GUARDED_BY(mu_);  // By endpoint.
};

}  // namespace granary

#endif  // GRANARY_SOURCE_OPENED_SOURCES_H_
