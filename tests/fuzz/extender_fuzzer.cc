// Fuzzes the Kubernetes scheduler extender's handling of request bodies: any
// bytes, as kube-scheduler (or anyone reaching its port) may POST them, go to
// Extender::Filter and Extender::Prioritize, whose locator answers from a
// fixed cluster: "imagenet" is cached in groups rack-a and rack-b, "empty" has
// no bytes, "unreachable" cannot be located, every other dataset is unknown.
//
// Properties: both calls accept or refuse a body alike (a pod naming more than
// kMaxDatasets datasets is refused in Filter's Error field and by Prioritize's
// INVALID_ARGUMENT), refusals are INVALID_ARGUMENT, and accepted bodies get JSON replies that
// kube-scheduler can read: Filter's is an ExtenderFilterResult that passes or fails every
// candidate, Prioritize's scores each candidate 0-10 in request order.
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"
#include "scheduler_hooks/extender.h"
#include "tests/fuzz/fuzz_check.h"

namespace granary::hooks {
namespace {

using nlohmann::json;

absl::StatusOr<v1::LocateResponse> Locate(const std::string& dataset) {
  if (dataset == "unreachable") return absl::UnavailableError("no server answers");
  v1::LocateResponse response;
  response.set_name(dataset);
  if (dataset == "empty") return response;
  if (dataset != "imagenet") return absl::NotFoundError(dataset);
  response.set_total_bytes(100);
  for (auto [node, group, bytes] :
       {std::tuple{"node-a", "rack-a", 60}, std::tuple{"node-b", "rack-a", 20},
        std::tuple{"node-c", "rack-b", 10}}) {
    v1::NodeLocality* locality = response.add_nodes();
    locality->set_node_id(node);
    locality->set_group(group);
    locality->set_cached_bytes(bytes);
  }
  for (auto [group, bytes] : {std::pair{"rack-a", 80}, std::pair{"rack-b", 10}}) {
    v1::GroupLocality* locality = response.add_groups();
    locality->set_group(group);
    locality->set_cached_bytes(bytes);
  }
  return response;
}

// Few, so that fuzzed pods reach the cap.
constexpr size_t kMaxDatasets = 3;

// A Filter reply that refuses the pod (too many datasets): only its Error set.
bool IsRefusal(const std::string& reply) {
  json result = json::parse(reply, nullptr, /*allow_exceptions=*/false);
  GRANARY_FUZZ_CHECK(result.is_object() && result["Error"].is_string(), reply);
  if (result["Error"] == "") return false;
  GRANARY_FUZZ_CHECK(result["Error"].get<std::string>().starts_with("granary: the pod names "),
                     reply);
  GRANARY_FUZZ_CHECK(result["NodeNames"].is_null() && result["Nodes"].is_null(), reply);
  return true;
}

// The candidate names of an accepted ExtenderArgs, in order.
std::vector<std::string> Candidates(json args) {
  std::vector<std::string> names;
  if (!args["NodeNames"].is_null()) {
    for (const json& name : args["NodeNames"]) names.push_back(name.get<std::string>());
    return names;
  }
  for (json& node : args["Nodes"]["items"]) {
    names.push_back(node["metadata"]["name"].get<std::string>());
  }
  return names;
}

void CheckFilterReply(const std::string& reply, const std::vector<std::string>& candidates) {
  json result = json::parse(reply, nullptr, /*allow_exceptions=*/false);
  GRANARY_FUZZ_CHECK(result.is_object(), reply);
  GRANARY_FUZZ_CHECK(result["FailedAndUnresolvableNodes"].is_object(), reply);
  std::set<std::string> accounted;
  for (const auto& [name, reason] : result["FailedAndUnresolvableNodes"].items()) {
    GRANARY_FUZZ_CHECK(reason.is_string(), reply);
    accounted.insert(name);
  }
  const json& names = result["NodeNames"];
  const json& nodes = result["Nodes"];
  GRANARY_FUZZ_CHECK(names.is_array() != nodes.is_object(), reply);
  for (const json& passed : names.is_array() ? names : nodes["items"]) {
    accounted.insert(names.is_array() ? passed.get<std::string>()
                                      : passed["metadata"]["name"].get<std::string>());
  }
  for (const std::string& candidate : candidates) {
    GRANARY_FUZZ_CHECK(accounted.count(candidate) == 1, candidate);
  }
}

void CheckPrioritizeReply(const std::string& reply, const std::vector<std::string>& candidates) {
  json result = json::parse(reply, nullptr, /*allow_exceptions=*/false);
  GRANARY_FUZZ_CHECK(result.is_array() && result.size() == candidates.size(), reply);
  for (size_t i = 0; i < candidates.size(); ++i) {
    const json& host = result[i];
    GRANARY_FUZZ_CHECK(host["Host"] == candidates[i], reply);
    GRANARY_FUZZ_CHECK(
        host["Score"].is_number_integer() && host["Score"] >= 0 && host["Score"] <= 10, reply);
  }
}

}  // namespace
}  // namespace granary::hooks

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace granary::hooks;
  static const Extender* extender =
      new Extender(Locate, ExtenderOptions{.max_datasets_per_pod = kMaxDatasets});
  std::string_view body(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<std::string> filtered = extender->Filter(body);
  absl::StatusOr<std::string> prioritized = extender->Prioritize(body);
  if (filtered.ok() && IsRefusal(*filtered)) {
    GRANARY_FUZZ_CHECK(absl::IsInvalidArgument(prioritized.status()), std::string(body));
    return 0;
  }
  GRANARY_FUZZ_CHECK(filtered.ok() == prioritized.ok(), std::string(body));
  if (!filtered.ok()) {
    GRANARY_FUZZ_CHECK(absl::IsInvalidArgument(filtered.status()), filtered.status().ToString());
    GRANARY_FUZZ_CHECK(absl::IsInvalidArgument(prioritized.status()),
                       prioritized.status().ToString());
    return 0;
  }
  std::vector<std::string> candidates = Candidates(json::parse(body));
  CheckFilterReply(*filtered, candidates);
  CheckPrioritizeReply(*prioritized, candidates);
  return 0;
}
