#include "scheduler_hooks/json_body.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "common/base/absl_compat.h"

namespace granary::hooks {

absl::Status TooDeep() {
  return absl::InvalidArgumentError(
      absl::StrCat("request body nests deeper than ", kMaxJsonDepth, " levels"));
}

absl::StatusOr<nlohmann::json> ParseJsonObject(std::string_view body, std::string_view what,
                                               const KeepJsonValue& keep) {
  using nlohmann::json;
  using Event = json::parse_event_t;
  bool too_deep = false;
  // For each depth (the containers around a value): whether the container
  // holding the values there is built, whether it is an array, and the key
  // of the value being parsed there. Only the values of built containers are
  // asked about.
  std::vector<bool> built(1, true);
  std::vector<bool> in_array(1, false);
  std::vector<std::string> keys(1);
  std::vector<std::string_view> path;
  const auto kept = [&](size_t depth) {
    if (depth >= built.size() || !built[depth]) return false;
    path.clear();
    for (size_t level = 1; level <= depth; ++level) {
      path.push_back(in_array[level] ? std::string_view() : std::string_view(keys[level]));
    }
    return keep(path);
  };
  json parsed = json::parse(
      body,
      [&](int signed_depth, Event event, json& value) {
        const size_t depth = static_cast<size_t>(signed_depth);
        if (event == Event::object_start || event == Event::array_start) {
          if (depth > kMaxJsonDepth) {
            too_deep = true;
            return false;
          }
          if (!keep) return true;
          // The members of this container are one level deeper.
          const bool kept_here = kept(depth);
          built.resize(depth + 2);
          in_array.resize(depth + 2);
          keys.resize(depth + 2);
          built[depth + 1] = kept_here;
          in_array[depth + 1] = event == Event::array_start;
          return kept_here;
        }
        if (!keep) return true;
        if (event == Event::key) {
          // Keys inside a container too deep to keep are not followed.
          if (depth < keys.size() && built[depth]) {
            keys[depth] = value.get_ref<const std::string&>();
          }
          return true;
        }
        return event == Event::value ? kept(depth) : true;
      },
      /*allow_exceptions=*/false);
  if (too_deep) return TooDeep();
  if (parsed.is_discarded() || !parsed.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("request body is not a JSON ", AsAbsl(what), " object"));
  }
  return parsed;
}

std::string DumpJson(const nlohmann::json& value) {
  return value.dump(-1, ' ', /*ensure_ascii=*/false, nlohmann::json::error_handler_t::replace);
}

}  // namespace granary::hooks
