#include "tests/support/sigv4_verifier.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/base/absl_compat.h"
#include "common/source_access/s3_location.h"

namespace granary::testing {
namespace {

std::string Hex(const unsigned char* bytes, size_t size) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < size; ++i) {
    out.push_back(kDigits[bytes[i] >> 4]);
    out.push_back(kDigits[bytes[i] & 0xF]);
  }
  return out;
}

std::string Sha256Hex(std::string_view data) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), digest);
  return Hex(digest, sizeof(digest));
}

std::string Hmac(std::string_view key, std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), digest, &size);
  return std::string(reinterpret_cast<char*>(digest), size);
}

// As S3 decodes: a '%' without two hex digits after it stays as it is.
std::string PercentDecode(std::string_view text) {
  return S3UriDecode(text, /*plus_is_space=*/false).value_or(std::string(text));
}

// Lowercase name, value trimmed with inner runs of spaces made one; values
// of a repeated header joined with ','.
std::string HeaderValue(const SignedRequest& request, std::string_view name) {
  std::vector<std::string> values;
  for (const auto& [header, value] : request.headers) {
    if (!absl::EqualsIgnoreCase(header, AsAbsl(name))) continue;
    std::string collapsed;
    for (char c : absl::StripAsciiWhitespace(value)) {
      if (c == ' ' && !collapsed.empty() && collapsed.back() == ' ') continue;
      collapsed.push_back(c);
    }
    values.push_back(std::move(collapsed));
  }
  return absl::StrJoin(values, ",");
}

std::string CanonicalQuery(std::string_view query) {
  std::vector<std::pair<std::string, std::string>> pairs;
  for (absl::string_view pair : absl::StrSplit(AsAbsl(query), '&', absl::SkipEmpty())) {
    size_t equals = pair.find('=');
    std::string name = PercentDecode(AsStd(pair.substr(0, equals)));
    std::string value =
        equals == absl::string_view::npos ? "" : PercentDecode(AsStd(pair.substr(equals + 1)));
    pairs.emplace_back(S3UriEncode(name, false), S3UriEncode(value, false));
  }
  std::sort(pairs.begin(), pairs.end());
  std::vector<std::string> parts;
  for (const auto& [name, value] : pairs) parts.push_back(absl::StrCat(name, "=", value));
  return absl::StrJoin(parts, "&");
}

}  // namespace

SigV4Computation ComputeSigV4(const SignedRequest& request,
                              const std::vector<std::string>& signed_headers,
                              std::string_view amz_date, std::string_view secret,
                              std::string_view region, std::string_view service) {
  std::string_view target = request.target;
  std::string_view query;
  if (size_t mark = target.find('?'); mark != std::string_view::npos) {
    query = target.substr(mark + 1);
    target = target.substr(0, mark);
  }
  std::string headers;
  for (const std::string& name : signed_headers) {
    absl::StrAppend(&headers, name, ":", HeaderValue(request, name), "\n");
  }
  std::string payload_hash = HeaderValue(request, "x-amz-content-sha256");
  if (payload_hash.empty()) payload_hash = Sha256Hex(request.body);
  SigV4Computation out;
  out.canonical_request =
      absl::StrCat(request.method, "\n", S3UriEncode(PercentDecode(target), /*keep_slashes=*/true),
                   "\n", CanonicalQuery(query), "\n", headers, "\n",
                   absl::StrJoin(signed_headers, ";"), "\n", payload_hash);
  const std::string_view date = amz_date.substr(0, 8);
  const std::string scope =
      absl::StrCat(AsAbsl(date), "/", AsAbsl(region), "/", AsAbsl(service), "/aws4_request");
  out.string_to_sign = absl::StrCat("AWS4-HMAC-SHA256\n", AsAbsl(amz_date), "\n", scope, "\n",
                                    Sha256Hex(out.canonical_request));
  std::string key = Hmac(absl::StrCat("AWS4", AsAbsl(secret)), date);
  key = Hmac(key, region);
  key = Hmac(key, service);
  key = Hmac(key, "aws4_request");
  const std::string signature = Hmac(key, out.string_to_sign);
  out.signature = Hex(reinterpret_cast<const unsigned char*>(signature.data()), signature.size());
  return out;
}

std::optional<std::string> SigV4Refusal(const SignedRequest& request, std::string_view access_key,
                                        std::string_view secret, std::string_view region) {
  constexpr std::string_view kAlgorithm = "AWS4-HMAC-SHA256 ";
  const std::string authorization = HeaderValue(request, "authorization");
  if (!absl::StartsWith(authorization, AsAbsl(kAlgorithm))) return "AccessDenied";
  std::string credential, signed_headers, signature;
  for (absl::string_view field :
       absl::StrSplit(absl::string_view(authorization).substr(kAlgorithm.size()), ',')) {
    field = absl::StripAsciiWhitespace(field);
    if (absl::ConsumePrefix(&field, "Credential=")) credential = std::string(field);
    if (absl::ConsumePrefix(&field, "SignedHeaders=")) signed_headers = std::string(field);
    if (absl::ConsumePrefix(&field, "Signature=")) signature = std::string(field);
  }
  std::vector<std::string> scope = absl::StrSplit(credential, '/');
  const std::string amz_date = HeaderValue(request, "x-amz-date");
  if (scope.size() != 5 || amz_date.size() != 16 || scope[1] != amz_date.substr(0, 8) ||
      scope[2] != region || scope[3] != "s3" || scope[4] != "aws4_request") {
    return "AccessDenied";
  }
  if (scope[0] != access_key) return "InvalidAccessKeyId";
  std::vector<std::string> headers = absl::StrSplit(signed_headers, ';');
  if (std::find(headers.begin(), headers.end(), "host") == headers.end()) return "AccessDenied";
  SigV4Computation expected = ComputeSigV4(request, headers, amz_date, secret, region, "s3");
  if (expected.signature != signature) return "SignatureDoesNotMatch";
  return std::nullopt;
}

}  // namespace granary::testing
