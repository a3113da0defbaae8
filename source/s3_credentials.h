// The keys granaryd signs S3 requests with, found the way AWS's own tools
// find them, in granaryd's environment and files (never the CLI's: keys do
// not travel over Granary's API, and the catalog records only a profile's
// name):
//
//  1. with no profile named by the dataset: AWS_ACCESS_KEY_ID and
//     AWS_SECRET_ACCESS_KEY (with AWS_SESSION_TOKEN, if set);
//  2. the profile (the dataset's, else AWS_PROFILE, else "default") in the
//     shared credentials file (AWS_SHARED_CREDENTIALS_FILE, else
//     ~/.aws/credentials): section [NAME];
//  3. the same profile in the config file (AWS_CONFIG_FILE, else
//     ~/.aws/config): section [profile NAME], or [default].
//
// Errors never quote a key; they name the profile and the places looked in.
//
// Thread-safety: pure functions (they read the environment and files).
#ifndef GRANARY_SOURCE_S3_CREDENTIALS_H_
#define GRANARY_SOURCE_S3_CREDENTIALS_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace granary {

struct S3Credentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  // Empty unless temporary credentials.
};

// FAILED_PRECONDITION naming the profile and where it looked when no source
// has keys for it; INVALID_ARGUMENT naming the file when a profile there has
// one key of the pair but not the other.
absl::StatusOr<S3Credentials> FindS3Credentials(std::string_view profile);

}  // namespace granary

#endif  // GRANARY_SOURCE_S3_CREDENTIALS_H_
