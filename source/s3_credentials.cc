#include "source/s3_credentials.h"

#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/absl_compat.h"

namespace granary {
namespace {

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? "" : value;
}

std::string FileOrHome(const char* variable, std::string_view under_home) {
  std::string named = Env(variable);
  if (!named.empty()) return named;
  return absl::StrCat(Env("HOME"), "/.aws/", AsAbsl(under_home));
}

using Section = std::map<std::string, std::string>;

// The key = value pairs of section `[name]` of an INI file, as AWS's files
// are written; nullopt when the file or the section is missing.
std::optional<Section> ReadSection(const std::string& path, std::string_view name) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::optional<Section> found;
  bool inside = false;
  std::string line;
  while (std::getline(in, line)) {
    std::string_view text = AsStd(absl::StripAsciiWhitespace(line));
    if (text.empty() || text.front() == '#' || text.front() == ';') continue;
    if (text.front() == '[' && text.back() == ']') {
      std::string_view section =
          AsStd(absl::StripAsciiWhitespace(AsAbsl(text.substr(1, text.size() - 2))));
      inside = section == name;
      if (inside && !found) found.emplace();
      continue;
    }
    size_t equals = text.find('=');
    if (!inside || equals == std::string_view::npos) continue;
    (*found)[std::string(absl::StripAsciiWhitespace(AsAbsl(text.substr(0, equals))))] =
        std::string(absl::StripAsciiWhitespace(AsAbsl(text.substr(equals + 1))));
  }
  return found;
}

// The keys of `section` of `path`: nullopt when it has neither key.
absl::StatusOr<std::optional<S3Credentials>> KeysOf(const Section& section, const std::string& path,
                                                    std::string_view profile) {
  auto get = [&section](const char* key) {
    auto it = section.find(key);
    return it == section.end() ? std::string() : it->second;
  };
  S3Credentials keys{get("aws_access_key_id"), get("aws_secret_access_key"),
                     get("aws_session_token")};
  if (keys.access_key_id.empty() && keys.secret_access_key.empty()) return std::nullopt;
  if (keys.access_key_id.empty() || keys.secret_access_key.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("profile '", AsAbsl(profile), "' in ", path,
                     " has only one of aws_access_key_id and aws_secret_access_key"));
  }
  return keys;
}

}  // namespace

absl::StatusOr<S3Credentials> FindS3Credentials(std::string_view profile) {
  std::vector<std::string> looked;
  if (profile.empty()) {
    S3Credentials keys{Env("AWS_ACCESS_KEY_ID"), Env("AWS_SECRET_ACCESS_KEY"),
                       Env("AWS_SESSION_TOKEN")};
    if (!keys.access_key_id.empty() && !keys.secret_access_key.empty()) return keys;
    looked.push_back("AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY");
  }
  std::string name(profile);
  if (name.empty()) name = Env("AWS_PROFILE");
  if (name.empty()) name = "default";
  const std::string credentials_file = FileOrHome("AWS_SHARED_CREDENTIALS_FILE", "credentials");
  const std::string config_file = FileOrHome("AWS_CONFIG_FILE", "config");
  const std::string config_section = name == "default" ? name : absl::StrCat("profile ", name);
  for (const auto& [path, section] :
       {std::pair{credentials_file, name}, std::pair{config_file, config_section}}) {
    looked.push_back(absl::StrCat(path, " [", section, "]"));
    std::optional<Section> found = ReadSection(path, section);
    if (!found) continue;
    absl::StatusOr<std::optional<S3Credentials>> keys = KeysOf(*found, path, name);
    if (!keys.ok()) return keys.status();
    if (*keys) return **keys;
  }
  return absl::FailedPreconditionError(
      absl::StrCat("granaryd has no S3 credentials for profile '", name,
                   "' (looked in: ", absl::StrJoin(looked, ", "), ")"));
}

}  // namespace granary
