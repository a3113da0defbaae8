// granary-test-s3: the S3 endpoint of the S3 tests as a program of its own,
// for harnesses that are not C++ (the soak, tests/soak): a real s3rver with
// the buckets named on the command line, behind the SigV4 front end that
// checks signatures and If-Match as S3 does (StartVerifiedS3rver,
// s3_test_endpoint.h), listening on the address given.
//
//   granary-test-s3 [--listen ADDRESS] BUCKET...
//
// Once both serve, it prints one JSON line on standard output: the signed
// endpoint and the keys every request must be signed with,
//   {"endpoint": "http://ADDRESS:PORT", "access_key": ..., "secret": ...,
//    "region": "us-east-1"}
// and serves until SIGTERM or SIGINT. Then it stops the front end and
// s3rver (whose objects, under $TMPDIR, go with it), prints one more JSON
// line with what the front end counted,
//   {"object_gets": N, "signature_refusals": N, "precondition_failures": N}
// and exits 0. It exits 1 with the reason on standard error when the
// endpoint cannot start; bad arguments are refused with CLI11's usage
// message and status. A test program, not installed.
#include <CLI/CLI.hpp>
#include <iostream>
#include <string>
#include <vector>

#include "common/base/stop_signals.h"
#include "nlohmann/json.hpp"
#include "tests/support/s3_test_endpoint.h"

namespace granary::testing {
namespace {

int Run(int argc, char** argv) {
  std::string listen_address = "127.0.0.1";
  std::vector<std::string> buckets;
  CLI::App app("granary-test-s3: s3rver behind the SigV4 front end of the S3 tests",
               "granary-test-s3");
  app.add_option("--listen", listen_address,
                 "IPv4 address of this host the front end listens on (default 127.0.0.1)");
  app.add_option("BUCKET", buckets, "Buckets s3rver holds")->required();
  CLI11_PARSE(app, argc, argv);

  // Before any thread starts, so that every thread has the stop signals blocked.
  StopSignals stop_signals;
  absl::StatusOr<VerifiedS3rver> s3 = StartVerifiedS3rver(buckets, listen_address);
  if (!s3.ok()) {
    std::cerr << "granary-test-s3: " << s3.status() << std::endl;
    return 1;
  }
  const SigV4FrontEnd::Keys keys{kS3rverKey, kS3rverSecret};
  std::cout << nlohmann::json{{"endpoint", s3->front->endpoint()},
                              {"access_key", keys.access_key},
                              {"secret", keys.secret},
                              {"region", keys.region}}
                   .dump()
            << std::endl;
  stop_signals.Wait();
  const nlohmann::json counted = {{"object_gets", s3->front->object_gets()},
                                  {"signature_refusals", s3->front->signature_refusals()},
                                  {"precondition_failures", s3->front->precondition_failures()}};
  s3->front.reset();
  s3->s3rver.reset();
  std::cout << counted.dump() << std::endl;
  return 0;
}

}  // namespace
}  // namespace granary::testing

int main(int argc, char** argv) { return granary::testing::Run(argc, argv); }
