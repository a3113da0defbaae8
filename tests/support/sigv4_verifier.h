// AWS Signature Version 4 as a server checks it: from a request as it came
// over the wire (method, raw target, headers, body), the canonical request
// (path and query decoded, then encoded the way SigV4 encodes them), the
// string to sign, the signing key and the signature. The front end of the S3
// tests (sigv4_front_end.h) refuses every request whose signature is not the
// one computed here; sigv4_verifier_test checks this code against AWS's
// published examples.
//
// A client that signs a URL other than its canonical form (a space left
// unencoded, a lowercase %xx, unsorted parameters) gets
// SignatureDoesNotMatch here, as it would from S3.
//
// Thread-safety: pure functions.
#ifndef GRANARY_TESTS_SUPPORT_SIGV4_VERIFIER_H_
#define GRANARY_TESTS_SUPPORT_SIGV4_VERIFIER_H_

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace granary::testing {

struct SignedRequest {
  std::string method;
  std::string target;  // As sent: the path, '?', the query.
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
};

struct SigV4Computation {
  std::string canonical_request;
  std::string string_to_sign;
  std::string signature;  // Lowercase hex.
};

// What a server computes for `request` signed over `signed_headers`
// (lowercase, sorted, as the Authorization header lists them) at
// `amz_date` (yyyymmddThhmmssZ) for `region` and `service`.
SigV4Computation ComputeSigV4(const SignedRequest& request,
                              const std::vector<std::string>& signed_headers,
                              std::string_view amz_date, std::string_view secret,
                              std::string_view region, std::string_view service);

// nullopt when `request` carries a valid "AWS4-HMAC-SHA256" Authorization
// header by `access_key` with `secret` for `region` and service s3. Else
// the error code S3 would answer with: "AccessDenied" (no or a malformed
// header, another region or service), "InvalidAccessKeyId",
// "SignatureDoesNotMatch".
std::optional<std::string> SigV4Refusal(const SignedRequest& request, std::string_view access_key,
                                        std::string_view secret, std::string_view region);

}  // namespace granary::testing

#endif  // GRANARY_TESTS_SUPPORT_SIGV4_VERIFIER_H_
