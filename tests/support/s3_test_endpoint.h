// What the S3 tests share to put a bucket before granaryd: a real s3rver
// holding the buckets asked for behind the SigV4 front end (which checks
// signatures and If-Match as S3 does) with s3rver's keys, the source string
// naming a prefix of a bucket there, and the command prefix that starts a
// granaryd with exactly the AWS credentials a test gives it (none of the test
// runner's own AWS variables, and a HOME of the test's, so that no shared
// credentials file but the test's is found).
//
// Thread-safety: plain values and functions; see S3rverProcess and
// SigV4FrontEnd for theirs.
#ifndef GRANARY_TESTS_SUPPORT_S3_TEST_ENDPOINT_H_
#define GRANARY_TESTS_SUPPORT_S3_TEST_ENDPOINT_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "tests/support/s3rver_process.h"
#include "tests/support/sigv4_front_end.h"

namespace granary::testing {

// Declared in this order so that the front end stops before s3rver.
struct VerifiedS3rver {
  std::unique_ptr<S3rverProcess> s3rver;
  std::unique_ptr<SigV4FrontEnd> front;
};

// The front end listens on `listen_address` (s3rver on loopback behind
// it). s3rver's and the front end's errors (see their Start()).
absl::StatusOr<VerifiedS3rver> StartVerifiedS3rver(const std::vector<std::string>& buckets,
                                                   const std::string& listen_address = "127.0.0.1");

// The source string of the keys under `prefix` (no trailing '/'; empty: the
// whole bucket) of `bucket` at `endpoint`, path-style, region us-east-1.
std::string S3SourceOf(std::string_view bucket, const std::string& endpoint,
                       const std::string& prefix);

// NAME=value settings that give granaryd s3rver's keys.
std::vector<std::string> S3rverKeysEnvironment();

// The GranarydOptions::command_prefix that runs granaryd with HOME=`home`,
// no AWS variable of this process, and `environment` (NAME=value).
std::vector<std::string> GranarydS3CommandPrefix(const std::string& home,
                                                 const std::vector<std::string>& environment);

}  // namespace granary::testing

#endif  // GRANARY_TESTS_SUPPORT_S3_TEST_ENDPOINT_H_
