#include "scheduler_hooks/json_body.h"

#include "absl/strings/str_cat.h"
#include "common/absl_compat.h"

namespace granary::hooks {

absl::Status TooDeep() {
  return absl::InvalidArgumentError(
      absl::StrCat("request body nests deeper than ", kMaxJsonDepth, " levels"));
}

absl::StatusOr<nlohmann::json> ParseJsonObject(std::string_view body, std::string_view what) {
  using nlohmann::json;
  bool too_deep = false;
  json parsed = json::parse(
      body,
      [&too_deep](int depth, json::parse_event_t event, json&) {
        // `depth` counts the containers around the one that starts.
        too_deep |= (event == json::parse_event_t::object_start ||
                     event == json::parse_event_t::array_start) &&
                    static_cast<size_t>(depth) > kMaxJsonDepth;
        return true;
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
