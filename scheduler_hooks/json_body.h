// Request bodies of the Kubernetes hooks (the extender's ExtenderArgs, the
// webhook's AdmissionReview), parsed with a bound on nesting. Kubernetes
// objects nest a few dozen levels; a body nesting containers deeper than
// kMaxJsonDepth is refused, since writing a tree back out (the extender's
// NodeList, the webhook's patch) recurses once per level and a few hundred
// kilobytes of brackets would overflow the stack.
//
// Replies are written with DumpJson, which cannot throw: bytes that are not
// UTF-8 (a name from the cluster) are replaced.
//
// Thread-safety: pure functions.
#ifndef GRANARY_SCHEDULER_HOOKS_JSON_BODY_H_
#define GRANARY_SCHEDULER_HOOKS_JSON_BODY_H_

#include <cstddef>
#include <functional>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace granary::hooks {

inline constexpr size_t kMaxJsonDepth = 512;

// INVALID_ARGUMENT saying the body nests deeper than kMaxJsonDepth.
absl::Status TooDeep();

// Whether a value of the body is kept, from the keys leading to it ("" for
// an element of an array): {"Nodes", "items", "", "metadata"} is the metadata
// of a node in ExtenderArgs.Nodes.items. A value dropped is never built, nor
// anything inside it.
using KeepJsonValue = std::function<bool(std::span<const std::string_view> path)>;

// The JSON object in `body`, with the values `keep` keeps (all without it).
// INVALID_ARGUMENT from TooDeep(), or saying the body "is not a JSON <what>
// object" when it is not JSON or not an object.
absl::StatusOr<nlohmann::json> ParseJsonObject(std::string_view body, std::string_view what,
                                               const KeepJsonValue& keep = nullptr);

// `value` as compact JSON.
std::string DumpJson(const nlohmann::json& value);

}  // namespace granary::hooks

#endif  // GRANARY_SCHEDULER_HOOKS_JSON_BODY_H_
