#include "common/net/cluster_token.h"

#include <sys/stat.h>

#include <array>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/base/absl_compat.h"
#include "common/base/file_util.h"
#include "common/base/status.h"

namespace granary {

namespace {

// Words that mark a stand-in for a token in examples and templates (the value
// in deploy/kubernetes/secret.yaml is "REPLACE-WITH-A-RANDOM-TOKEN-OF-32-
// CHARACTERS"), looked for in the token's letters and digits, lower-cased.
constexpr std::array<std::string_view, 6> kPlaceholderWords = {
    "replacewith", "changeme", "placeholder", "example", "yourtoken", "insertrandom"};

bool IsPlaceholder(std::string_view token) {
  std::string letters;
  for (char c : token) {
    if (absl::ascii_isalnum(c)) letters.push_back(absl::ascii_tolower(c));
  }
  for (std::string_view word : kPlaceholderWords) {
    if (letters.find(word) != std::string::npos) return true;
  }
  return false;
}

// Bits of a token drawn at random from the classes of characters it uses.
double EstimatedBits(std::string_view token) {
  bool digit = false, lower = false, upper = false, other = false;
  for (char c : token) {
    digit |= absl::ascii_isdigit(c);
    lower |= absl::ascii_islower(c);
    upper |= absl::ascii_isupper(c);
    other |= !absl::ascii_isalnum(c);
  }
  int alphabet = (digit ? 10 : 0) + (lower ? 26 : 0) + (upper ? 26 : 0) + (other ? 32 : 0);
  return static_cast<double>(token.size()) * std::log2(std::max(alphabet, 2));
}

}  // namespace

absl::Status CheckClusterTokenStrength(std::string_view token, std::string_view origin) {
  std::set<char> distinct(token.begin(), token.end());
  if (distinct.size() < kMinClusterTokenDistinctCharacters) {
    return absl::InvalidArgumentError(absl::StrCat(
        AsAbsl(origin), " holds a token of ", distinct.size(), " distinct characters; at least ",
        kMinClusterTokenDistinctCharacters, " are required (a random token has many)"));
  }
  if (IsPlaceholder(token)) {
    return absl::InvalidArgumentError(
        absl::StrCat(AsAbsl(origin),
                     " holds a placeholder, not a token; write a random one, e.g. "
                     "head -c 32 /dev/urandom | base64 | tr -d '/+=\\n'"));
  }
  if (double bits = EstimatedBits(token); bits < kMinClusterTokenBits) {
    return absl::InvalidArgumentError(absl::StrCat(
        AsAbsl(origin), " holds a token of ", token.size(), " characters carrying about ",
        static_cast<int>(bits), " bits; at least ", kMinClusterTokenBits,
        " are required (e.g. 32 random hexadecimal digits with letters, or 22 of base64)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> LoadClusterToken(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) {
    return ErrnoStatus(errno, absl::StrCat("cluster token file ", path));
  }
  if ((info.st_mode & 077) != 0) {
    return absl::PermissionDeniedError(absl::StrCat(
        "cluster token file ", path, " has mode 0", absl::StrFormat("%03o", info.st_mode & 0777),
        ": a token file must not be readable by its group or others; run chmod 600 ", path));
  }
  auto text = ReadFileToString(path, "cluster token file");
  if (!text.ok()) return text.status();
  std::string token(absl::StripAsciiWhitespace(*text));
  if (token.find_first_of("\r\n") != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("cluster token file ", path, " must hold a single line"));
  }
  GRANARY_RETURN_IF_ERROR(
      CheckClusterTokenStrength(token, absl::StrCat("cluster token file ", path)));
  return token;
}

absl::StatusOr<std::string> ResolveClusterToken(std::string_view explicit_path) {
  std::string path(explicit_path);
  if (path.empty()) {
    const char* from_env = std::getenv("GRANARY_TOKEN_FILE");
    if (from_env == nullptr || from_env[0] == '\0') return std::string();
    path = from_env;
  }
  return LoadClusterToken(path);
}

std::string BearerValue(std::string_view token) { return absl::StrCat("Bearer ", AsAbsl(token)); }

bool TokensMatch(std::string_view presented, std::string_view expected) {
  // The length is not secret; the content is compared without early exit.
  if (presented.size() != expected.size()) return false;
  unsigned char difference = 0;
  for (size_t i = 0; i < presented.size(); ++i) {
    difference |= static_cast<unsigned char>(presented[i] ^ expected[i]);
  }
  return difference == 0;
}

}  // namespace granary
