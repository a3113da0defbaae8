// S3rverProcess runs a real S3 server for the S3 tests: s3rver 3.7.1 from the
// npm registry (installed by scripts/install-deps.sh into
// tests/support/s3rver), under Debian's Node.js, on a free loopback port with
// a temporary directory and the buckets asked for. Start() returns once it
// accepts connections.
//
// s3rver checks no signature and ignores If-Match: tests of signing and of
// conditional reads put a SigV4 front end (sigv4_front_end.h) before it.
// It needs `node --openssl-legacy-provider` under Node 17 and later (its
// continuation tokens use DES: without it a second listing page is a 500).
//
// Put() and Remove() write and delete objects over S3's REST API, signed
// (libcurl's SigV4) with s3rver's keys, S3RVER / S3RVER.
//
// Thread-safety: not thread-safe; one object per test.
#ifndef GRANARY_TESTS_SUPPORT_S3RVER_PROCESS_H_
#define GRANARY_TESTS_SUPPORT_S3RVER_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "tests/support/granaryd_process.h"

namespace granary::testing {

inline constexpr char kS3rverKey[] = "S3RVER";
inline constexpr char kS3rverSecret[] = "S3RVER";

class S3rverProcess {
 public:
  // FAILED_PRECONDITION naming the install command when s3rver or Node.js
  // is missing; UNAVAILABLE when it does not come up.
  static absl::StatusOr<std::unique_ptr<S3rverProcess>> Start(
      const std::vector<std::string>& buckets);
  ~S3rverProcess();
  S3rverProcess(const S3rverProcess&) = delete;
  S3rverProcess& operator=(const S3rverProcess&) = delete;

  // "http://127.0.0.1:<port>".
  std::string endpoint() const;
  int port() const { return port_; }
  std::string log() const;

  absl::Status Put(std::string_view bucket, std::string_view key, std::string_view bytes) const;
  absl::Status Remove(std::string_view bucket, std::string_view key) const;

 private:
  S3rverProcess() = default;
  absl::Status Send(const char* method, std::string_view bucket, std::string_view key,
                    std::string_view bytes) const;

  TempDir temp_;
  int port_ = 0;
  pid_t pid_ = -1;
  mutable void* curl_ = nullptr;  // Kept, so that writes reuse one connection.
};

}  // namespace granary::testing

#endif  // GRANARY_TESTS_SUPPORT_S3RVER_PROCESS_H_
