// Sources decides which sources a dataset may be registered from, and opens
// them (OpenedSources, source/opened_sources.h):
//  - a POSIX directory only beneath the configured source roots
//    (SourceRoots, cache_server/access/source_roots.h);
//  - an S3 bucket only at an endpoint listed in `s3_endpoints` (config) or
//    --s3-endpoint, so that registering cannot point granaryd (and its
//    credentials) at any host on its network. With none listed, no S3 source
//    is accepted.
// An S3 source that names no credentials profile is signed with its
// endpoint's profile in `s3_endpoint_profiles`, if it has one, else with the
// keys FindS3Credentials finds without a profile (source/s3_credentials.h).
// S3 sources are kept once opened, so that reads of a dataset reuse their
// connections. A registration or refresh opens its source afresh, so it
// signs with the credentials granaryd finds now.
//
// Thread-safety: all methods are safe to call concurrently.
#ifndef GRANARY_CACHE_SERVER_ACCESS_SOURCES_H_
#define GRANARY_CACHE_SERVER_ACCESS_SOURCES_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "cache_server/access/source_roots.h"
#include "source/opened_sources.h"
#include "source/source.h"

namespace granary {

class Sources {
 public:
  using Options = OpenedSources::Options;

  // INVALID_ARGUMENT naming an endpoint of `s3_endpoints` that is not
  // scheme://host[:port], or one of `options.s3_endpoint_profiles` that is
  // not in `s3_endpoints`.
  static absl::StatusOr<std::unique_ptr<Sources>> Create(
      const SourceRoots* roots, const std::vector<std::string>& s3_endpoints, Options options);

  // The form of `source` a dataset records: an S3 source string in its
  // canonical form (FormatS3Source), a POSIX source as it is.
  // INVALID_ARGUMENT naming what is wrong with an S3 source string.
  absl::StatusOr<std::string> Canonical(std::string_view source) const;

  // OK when `source` may be registered here; else PERMISSION_DENIED naming
  // it and what is allowed, NOT_FOUND for a missing directory,
  // INVALID_ARGUMENT for a malformed source.
  absl::Status Check(std::string_view source) const;

  // The source, checked as Check() does, to scan it for a registration or
  // a refresh; it replaces any kept for reads.
  absl::StatusOr<std::shared_ptr<const Source>> OpenToScan(std::string_view source);
  // The source, to read a file of it: the one kept, else opened (and kept).
  absl::StatusOr<std::shared_ptr<const Source>> OpenToRead(std::string_view source);

 private:
  Sources(const SourceRoots* roots, std::vector<std::string> s3_endpoints, Options options)
      : roots_(roots), s3_endpoints_(std::move(s3_endpoints)), opened_(std::move(options)) {}

  const SourceRoots* const roots_;
  const std::vector<std::string> s3_endpoints_;  // Canonical, as S3Location has them.
  OpenedSources opened_;
};

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_ACCESS_SOURCES_H_
