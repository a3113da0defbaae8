// S3Location is where an S3-compatible dataset lives, and how granaryd
// reaches it: a bucket, a key prefix, an endpoint, a region, the addressing
// style, the credentials profile granaryd signs with and the group that may
// read the objects through Granary. It is written into a dataset's source
// string, which the catalog keeps and peers exchange, as
//
//   s3://BUCKET[/PREFIX]?endpoint=URL&region=R&addressing=path|virtual
//        [&profile=P][&readers_gid=N]
//
// with every value percent-encoded. The string never holds credentials, only
// the profile's name: each granaryd finds the keys itself
// (source/s3_credentials.h).
//
// Thread-safety: plain values and pure functions.
#ifndef GRANARY_COMMON_SOURCE_ACCESS_S3_LOCATION_H_
#define GRANARY_COMMON_SOURCE_ACCESS_S3_LOCATION_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace granary {

enum class S3Addressing { kPath, kVirtualHosted };

struct S3Location {
  std::string bucket;
  // The keys of the dataset are those starting with it; it ends with '/'
  // unless empty (the whole bucket), so that "train" never takes "training".
  std::string prefix;
  std::string endpoint;  // scheme://host[:port], no path, no trailing '/'.
  std::string region = "us-east-1";
  S3Addressing addressing = S3Addressing::kPath;
  std::string profile;  // Empty: the environment, then the default profile.
  // Files are readable by this group (0440, directories 0550) and root; with
  // none, by root alone.
  std::optional<uint32_t> readers_gid;

  friend bool operator==(const S3Location&, const S3Location&) = default;
};

// Whether `source` is written as an S3 source (starts with "s3://"). Parts
// of Granary ask source/source_kind.h's KindOf, which decides every kind.
bool IsS3Source(std::string_view source);

// `endpoint` as S3Location keeps it: scheme://host[:port] in lower case,
// without a trailing '/'. INVALID_ARGUMENT naming it when it is not an
// http(s) URL of a host, or has a path, a user or a query.
absl::StatusOr<std::string> CanonicalS3Endpoint(std::string_view endpoint);

// Parses an s3:// source string. An endpoint left out is AWS's for the
// region (https://s3.REGION.amazonaws.com, virtual-hosted). INVALID_ARGUMENT
// naming what is wrong: the bucket (3-63 of a-z, 0-9, '.', '-'), an unknown
// parameter, an endpoint that is not http(s)://host[:port], a bad region,
// profile, addressing or gid.
absl::StatusOr<S3Location> ParseS3Source(std::string_view source);

// The canonical source string of `location`: ParseS3Source of it gives
// `location` back, and equal locations give equal strings (so a dataset's
// version does not depend on how its source was spelled).
std::string FormatS3Source(const S3Location& location);

// `text` with every byte outside A-Za-z0-9-._~ written %XX (uppercase hex),
// and '/' too unless `keep_slashes`: the encoding SigV4's canonical requests
// use.
std::string S3UriEncode(std::string_view text, bool keep_slashes);

// `text` with every %XX decoded (and '+' read as a space when
// `plus_is_space`, as S3's encoding-type=url writes keys); nullopt when a
// '%' is not followed by two hex digits.
std::optional<std::string> S3UriDecode(std::string_view text, bool plus_is_space);

}  // namespace granary

#endif  // GRANARY_COMMON_SOURCE_ACCESS_S3_LOCATION_H_
