#include "cache_server/config/members_file.h"

#include <yaml-cpp/yaml.h>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "cache_server/config/config.h"
#include "common/base/absl_compat.h"
#include "common/base/file_util.h"
#include "common/base/yaml_status.h"

namespace granary {
namespace {

absl::StatusOr<Member> ParseMember(const YAML::Node& node, size_t position,
                                   std::string_view origin) {
  std::string where = absl::StrCat(AsAbsl(origin), ": member ", position + 1);
  auto invalid = [&](std::string_view message) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", AsAbsl(message)));
  };
  if (!node.IsMap()) return invalid("must be a mapping with id, address, group and weight");
  Member member;
  for (const auto& field : node) {
    std::string key = field.first.as<std::string>();
    if (!field.second.IsScalar()) return invalid(absl::StrCat("'", key, "' must be a scalar"));
    std::string value = field.second.as<std::string>();
    if (key == "id") {
      member.id = value;
    } else if (key == "address") {
      absl::Status address = ValidateHostPort(absl::StrCat(where, " address"), value);
      if (!address.ok()) return address;
      member.address = value;
    } else if (key == "group") {
      member.group = value;
    } else if (key == "weight") {
      if (!absl::SimpleAtoi(value, &member.weight) || member.weight < 1 || member.weight > 1000) {
        return invalid(absl::StrCat("weight '", value, "' is not a whole number from 1 to 1000"));
      }
    } else {
      return invalid(absl::StrCat("unknown key '", key, "' (expected id, address, group, weight)"));
    }
  }
  if (member.id.empty()) return invalid("has no id");
  if (member.address.empty()) return invalid(absl::StrCat("'", member.id, "' has no address"));
  if (member.group.empty()) return invalid(absl::StrCat("'", member.id, "' has an empty group"));
  return member;
}

absl::StatusOr<std::vector<Member>> ParseRoot(const YAML::Node& root, std::string_view origin) {
  if (!root.IsMap() || !root["members"]) {
    return absl::InvalidArgumentError(
        absl::StrCat(AsAbsl(origin), ": expected a mapping with a 'members' list"));
  }
  for (const auto& field : root) {
    if (field.first.as<std::string>() != "members") {
      return absl::InvalidArgumentError(
          absl::StrCat(AsAbsl(origin), ": unknown key '", field.first.as<std::string>(), "'"));
    }
  }
  const YAML::Node list = root["members"];
  if (!list.IsSequence() || list.size() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(AsAbsl(origin), ": 'members' must be a non-empty list"));
  }
  std::vector<Member> members;
  for (size_t i = 0; i < list.size(); ++i) {
    auto member = ParseMember(list[i], i, origin);
    if (!member.ok()) return member.status();
    members.push_back(*std::move(member));
  }
  // The map checks ids, weights and duplicates the same way for every source
  // of membership.
  auto map = ClusterMap::Build(members);
  if (!map.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(AsAbsl(origin), ": ", map.status().message()));
  }
  return members;
}

}  // namespace

absl::StatusOr<std::vector<Member>> ParseMembersYaml(std::string_view yaml,
                                                     std::string_view origin) {
  // yaml-cpp reports malformed documents by throwing; nothing escapes here.
  try {
    return ParseRoot(YAML::Load(std::string(yaml)), origin);
  } catch (const YAML::Exception& error) {
    return YamlErrorStatus(origin, error);
  }
}

absl::StatusOr<std::vector<Member>> ReadMembersFile(const std::string& path) {
  auto text = ReadFileToString(path, "members file");
  if (!text.ok()) return text.status();
  return ParseMembersYaml(*text, path);
}

}  // namespace granary
