#include "common/source_access/s3_location.h"

#include <charconv>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/base/absl_compat.h"
#include "common/base/printable.h"
#include "common/base/status.h"

namespace granary {
namespace {

constexpr std::string_view kScheme = "s3://";

absl::Status Invalid(std::string_view source, std::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("source '", Printable(source), "': ", AsAbsl(what)));
}

absl::StatusOr<std::string> PercentDecode(std::string_view text, std::string_view source) {
  std::optional<std::string> decoded = S3UriDecode(text, /*plus_is_space=*/false);
  if (!decoded) return Invalid(source, "a '%' is not followed by two hex digits");
  return *std::move(decoded);
}

bool IsValidBucket(std::string_view bucket) {
  if (bucket.size() < 3 || bucket.size() > 63) return false;
  for (char c : bucket) {
    if (!absl::ascii_islower(static_cast<unsigned char>(c)) &&
        !absl::ascii_isdigit(static_cast<unsigned char>(c)) && c != '.' && c != '-') {
      return false;
    }
  }
  return bucket.front() != '.' && bucket.front() != '-' && bucket.back() != '.' &&
         bucket.back() != '-';
}

bool IsToken(std::string_view text) {
  if (text.empty() || text.size() > 64) return false;
  for (char c : text) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') {
      return false;
    }
  }
  return true;
}

}  // namespace

bool IsS3Source(std::string_view source) {
  return absl::StartsWith(AsAbsl(source), AsAbsl(kScheme));
}

absl::StatusOr<std::string> CanonicalS3Endpoint(std::string_view endpoint) {
  std::string_view rest = endpoint;
  if (absl::StartsWithIgnoreCase(AsAbsl(rest), "http://")) {
    rest.remove_prefix(7);
  } else if (absl::StartsWithIgnoreCase(AsAbsl(rest), "https://")) {
    rest.remove_prefix(8);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("endpoint '", Printable(endpoint), "' is not an http:// or https:// URL"));
  }
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  bool ok = !rest.empty();
  for (char c : rest) {
    ok = ok && (absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' ||
                c == ':' || c == '[' || c == ']');
  }
  if (!ok) {
    return absl::InvalidArgumentError(
        absl::StrCat("endpoint '", Printable(endpoint),
                     "' is not scheme://host[:port] (no path, user or query)"));
  }
  return absl::AsciiStrToLower(
      AsAbsl(endpoint.substr(0, endpoint.size() - (endpoint.back() == '/' ? 1 : 0))));
}

absl::StatusOr<S3Location> ParseS3Source(std::string_view source) {
  if (!IsS3Source(source)) return Invalid(source, "not an s3:// source");
  std::string_view rest = source.substr(kScheme.size());
  std::string_view query;
  if (size_t mark = rest.find('?'); mark != std::string_view::npos) {
    query = rest.substr(mark + 1);
    rest = rest.substr(0, mark);
  }
  S3Location location;
  size_t slash = rest.find('/');
  location.bucket = std::string(rest.substr(0, slash));
  if (!IsValidBucket(location.bucket)) {
    return Invalid(source, absl::StrCat("bucket '", Printable(location.bucket),
                                        "' is not 3-63 of a-z, 0-9, '.' and '-'"));
  }
  if (slash != std::string_view::npos) {
    GRANARY_ASSIGN_OR_RETURN(location.prefix, PercentDecode(rest.substr(slash + 1), source));
    while (!location.prefix.empty() && location.prefix.front() == '/') {
      location.prefix.erase(0, 1);
    }
    if (!location.prefix.empty() && location.prefix.back() != '/') location.prefix.push_back('/');
  }
  bool addressing_given = false;
  if (!query.empty()) {
    for (absl::string_view pair_view : absl::StrSplit(AsAbsl(query), '&')) {
      const std::string_view pair = AsStd(pair_view);
      size_t equals = pair.find('=');
      std::string_view name = pair.substr(0, equals);
      GRANARY_ASSIGN_OR_RETURN(
          std::string value,
          PercentDecode(equals == std::string_view::npos ? "" : pair.substr(equals + 1), source));
      if (name == "endpoint") {
        absl::StatusOr<std::string> endpoint = CanonicalS3Endpoint(value);
        if (!endpoint.ok()) return Invalid(source, AsStd(endpoint.status().message()));
        location.endpoint = *std::move(endpoint);
      } else if (name == "region") {
        if (!IsToken(value)) return Invalid(source, "region is not 1-64 of A-Za-z0-9._-");
        location.region = value;
      } else if (name == "profile") {
        if (!IsToken(value)) return Invalid(source, "profile is not 1-64 of A-Za-z0-9._-");
        location.profile = value;
      } else if (name == "addressing") {
        if (value != "path" && value != "virtual") {
          return Invalid(
              source, absl::StrCat("addressing '", Printable(value), "' is not path or virtual"));
        }
        location.addressing = value == "path" ? S3Addressing::kPath : S3Addressing::kVirtualHosted;
        addressing_given = true;
      } else if (name == "readers_gid") {
        uint32_t gid = 0;
        auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), gid);
        if (value.empty() || error != std::errc() || end != value.data() + value.size()) {
          return Invalid(source,
                         absl::StrCat("readers_gid '", Printable(value), "' is not a group id"));
        }
        location.readers_gid = gid;
      } else {
        return Invalid(source, absl::StrCat("unknown parameter '", Printable(name),
                                            "' (known: endpoint, region, addressing, profile, "
                                            "readers_gid)"));
      }
    }
  }
  if (location.endpoint.empty()) {
    location.endpoint = absl::StrCat("https://s3.", location.region, ".amazonaws.com");
    if (!addressing_given) location.addressing = S3Addressing::kVirtualHosted;
  }
  return location;
}

std::string FormatS3Source(const S3Location& location) {
  std::string out = absl::StrCat(AsAbsl(kScheme), location.bucket);
  if (!location.prefix.empty()) {
    absl::StrAppend(&out, "/", S3UriEncode(location.prefix, /*keep_slashes=*/true));
  }
  absl::StrAppend(&out, "?endpoint=", S3UriEncode(location.endpoint, false),
                  "&region=", location.region,
                  "&addressing=", location.addressing == S3Addressing::kPath ? "path" : "virtual");
  if (!location.profile.empty()) absl::StrAppend(&out, "&profile=", location.profile);
  if (location.readers_gid) absl::StrAppend(&out, "&readers_gid=", *location.readers_gid);
  return out;
}

std::string S3UriEncode(std::string_view text, bool keep_slashes) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (absl::ascii_isalnum(byte) || c == '-' || c == '.' || c == '_' || c == '~' ||
        (c == '/' && keep_slashes)) {
      out.push_back(c);
    } else {
      out.push_back('%');
      out.push_back(kHex[byte >> 4]);
      out.push_back(kHex[byte & 0xF]);
    }
  }
  return out;
}

std::optional<std::string> S3UriDecode(std::string_view text, bool plus_is_space) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '+' && plus_is_space) {
      out.push_back(' ');
    } else if (text[i] != '%') {
      out.push_back(text[i]);
    } else {
      int value = 0;
      if (i + 2 >= text.size()) return std::nullopt;
      const char* digits = text.data() + i + 1;
      auto [end, error] = std::from_chars(digits, digits + 2, value, 16);
      if (error != std::errc() || end != digits + 2) return std::nullopt;
      out.push_back(static_cast<char>(value));
      i += 2;
    }
  }
  return out;
}

}  // namespace granary
