#include "scheduler_hooks/extender.h"

#include <cmath>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/absl_compat.h"
#include "common/base/logging.h"
#include "common/scheduling/kubernetes_names.h"
#include "nlohmann/json.hpp"
#include "scheduler_hooks/json_body.h"
#include "scheduler_hooks/locality.h"
#include "scheduler_hooks/pod_request.h"

namespace granary::hooks {
namespace {

using nlohmann::json;

// An ExtenderArgs, checked.
struct Args {
  json pod;
  bool by_name = false;            // NodeNames form (nodeCacheCapable).
  json node_list;                  // The NodeList, when !by_name.
  std::vector<std::string> names;  // Candidate node names, in request order.
};

bool Present(const json& object, const char* key) {
  auto value = object.find(key);
  return value != object.end() && !value->is_null();
}

// Whether the NodeList's Node objects are kept whole (Filter answers with
// those that pass) or only their names (a NodeList of thousands of Nodes that
// Prioritize would build only to drop).
enum class NodeObjects { kWhole, kNamesOnly };

// Inside Nodes.items[i], only metadata.name.
bool NodeNameOrAbove(std::span<const std::string_view> path) {
  if (path.size() < 4 || path[0] != "Nodes" || path[1] != "items") return true;
  return path[3] == "metadata" && (path.size() == 4 || path[4] == "name");
}

absl::StatusOr<Args> ParseArgs(std::string_view body, NodeObjects nodes) {
  absl::StatusOr<json> object =
      ParseJsonObject(body, "ExtenderArgs",
                      nodes == NodeObjects::kNamesOnly ? KeepJsonValue(NodeNameOrAbove) : nullptr);
  if (!object.ok()) return object.status();
  json& parsed = *object;
  Args args;
  if (Present(parsed, "Pod")) args.pod = std::move(parsed["Pod"]);
  if (Present(parsed, "NodeNames")) {
    const json& names = parsed["NodeNames"];
    if (!names.is_array())
      return absl::InvalidArgumentError("ExtenderArgs.NodeNames is not a list");
    for (const json& name : names) {
      if (!name.is_string()) {
        return absl::InvalidArgumentError("ExtenderArgs.NodeNames holds a non-string");
      }
      args.names.push_back(name.get<std::string>());
    }
    args.by_name = true;
    return args;
  }
  if (!Present(parsed, "Nodes")) {
    return absl::InvalidArgumentError("ExtenderArgs has neither Nodes nor NodeNames");
  }
  args.node_list = std::move(parsed["Nodes"]);
  if (!args.node_list.is_object()) {
    return absl::InvalidArgumentError("ExtenderArgs.Nodes is not a NodeList");
  }
  json& items = args.node_list["items"];
  if (items.is_null()) items = json::array();
  if (!items.is_array())
    return absl::InvalidArgumentError("ExtenderArgs.Nodes.items is not a list");
  for (const json& node : items) {
    const json* name = nullptr;
    if (node.is_object() && node.contains("metadata") && node["metadata"].is_object() &&
        node["metadata"].contains("name")) {
      name = &node["metadata"]["name"];
    }
    if (name == nullptr || !name->is_string()) {
      return absl::InvalidArgumentError("a node in ExtenderArgs.Nodes has no metadata.name");
    }
    args.names.push_back(name->get<std::string>());
  }
  return args;
}

// The pod's datasets, located; neutral when they are unknown or the cluster
// cannot answer.
LocalityIndex Locate(const Locator& locator, const PodRequest& request) {
  absl::StatusOr<LocalityIndex> index = LocateDatasets(locator, request.datasets);
  if (index.ok()) return *std::move(index);
  GRANARY_LOG(WARNING) << index.status().message() << "; answering neutrally";
  return LocalityIndex();
}

std::string Percent(double share) { return absl::StrCat(std::floor(share * 100), "%"); }

}  // namespace

Extender::Extender(Locator locator, ExtenderOptions options)
    : locator_(std::move(locator)), options_(options) {}

absl::StatusOr<std::string> Extender::Filter(std::string_view body) const {
  absl::StatusOr<Args> args = ParseArgs(body, NodeObjects::kWhole);
  if (!args.ok()) return args.status();
  absl::StatusOr<PodRequest> request = ReadPodRequest(args->pod, options_.max_datasets_per_pod);
  if (!request.ok()) {
    return DumpJson({{"Nodes", nullptr},
                     {"NodeNames", nullptr},
                     {"FailedNodes", json::object()},
                     {"FailedAndUnresolvableNodes", json::object()},
                     {"Error", absl::StrCat("granary: ", request.status().message())}});
  }
  LocalityIndex index;
  if (request->locality_required) index = Locate(locator_, *request);

  json passed_names = json::array();
  json passed_nodes = json::array();
  json failed = json::object();
  for (size_t i = 0; i < args->names.size(); ++i) {
    const std::string& name = args->names[i];
    if (!index.neutral()) {
      NodeLocality locality = index.Of(name);
      if (locality.group_share < options_.required_group_share) {
        failed[name] =
            locality.group.empty()
                ? absl::StrCat(
                      "granary: not a Granary cache node, and the pod requires "
                      "locality of ",
                      absl::StrJoin(request->datasets, ", "))
                : absl::StrCat("granary: cache group '", locality.group, "' holds ",
                               Percent(locality.group_share), " of ",
                               absl::StrJoin(request->datasets, ", "), "; the pod requires ",
                               Percent(options_.required_group_share));
        continue;
      }
    }
    passed_names.push_back(name);
    if (!args->by_name) passed_nodes.push_back(std::move(args->node_list["items"][i]));
  }

  json reply = json::object();
  if (args->by_name) {
    reply["Nodes"] = nullptr;
    reply["NodeNames"] = std::move(passed_names);
  } else {
    args->node_list["items"] = std::move(passed_nodes);
    reply["Nodes"] = std::move(args->node_list);
    reply["NodeNames"] = nullptr;
  }
  reply["FailedNodes"] = json::object();
  reply["FailedAndUnresolvableNodes"] = std::move(failed);
  reply["Error"] = "";
  return DumpJson(reply);
}

absl::StatusOr<std::string> Extender::Prioritize(std::string_view body) const {
  absl::StatusOr<Args> args = ParseArgs(body, NodeObjects::kNamesOnly);
  if (!args.ok()) return args.status();
  absl::StatusOr<PodRequest> request = ReadPodRequest(args->pod, options_.max_datasets_per_pod);
  if (!request.ok()) return request.status();
  LocalityIndex index = Locate(locator_, *request);
  // Written directly: a json object per host costs more than the scoring.
  std::string reply = "[";
  for (const std::string& name : args->names) {
    if (reply.size() > 1) reply += ',';
    absl::StrAppend(&reply, "{\"Host\":", AsAbsl(DumpJson(name)),
                    ",\"Score\":", index.Of(name).score, "}");
  }
  reply += ']';
  return reply;
}

}  // namespace granary::hooks
