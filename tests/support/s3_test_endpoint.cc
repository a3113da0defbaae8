#include "tests/support/s3_test_endpoint.h"

#include "absl/strings/str_cat.h"
#include "common/source_access/s3_location.h"

namespace granary::testing {

absl::StatusOr<VerifiedS3rver> StartVerifiedS3rver(const std::vector<std::string>& buckets,
                                                   const std::string& listen_address) {
  VerifiedS3rver verified;
  absl::StatusOr<std::unique_ptr<S3rverProcess>> s3rver = S3rverProcess::Start(buckets);
  if (!s3rver.ok()) return s3rver.status();
  verified.s3rver = *std::move(s3rver);
  absl::StatusOr<std::unique_ptr<SigV4FrontEnd>> front =
      SigV4FrontEnd::Start(verified.s3rver->port(), {kS3rverKey, kS3rverSecret}, listen_address);
  if (!front.ok()) return front.status();
  verified.front = *std::move(front);
  return verified;
}

std::string S3SourceOf(std::string_view bucket, const std::string& endpoint,
                       const std::string& prefix) {
  S3Location location;
  location.bucket = std::string(bucket);
  location.prefix = prefix.empty() ? "" : prefix + "/";
  location.endpoint = endpoint;
  return FormatS3Source(location);
}

std::vector<std::string> S3rverKeysEnvironment() {
  return {absl::StrCat("AWS_ACCESS_KEY_ID=", kS3rverKey),
          absl::StrCat("AWS_SECRET_ACCESS_KEY=", kS3rverSecret)};
}

std::vector<std::string> GranarydS3CommandPrefix(const std::string& home,
                                                 const std::vector<std::string>& environment) {
  std::vector<std::string> prefix = {
      "/usr/bin/env",          "-u", "AWS_ACCESS_KEY_ID", "-u",
      "AWS_SECRET_ACCESS_KEY", "-u", "AWS_PROFILE",       absl::StrCat("HOME=", home)};
  prefix.insert(prefix.end(), environment.begin(), environment.end());
  return prefix;
}

}  // namespace granary::testing
