#include "scheduler_hooks/extender.h"

#include <cmath>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/absl_compat.h"
#include "common/logging.h"
#include "nlohmann/json.hpp"
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

absl::StatusOr<Args> ParseArgs(std::string_view body) {
  json parsed = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || !parsed.is_object()) {
    return absl::InvalidArgumentError("request body is not a JSON ExtenderArgs object");
  }
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
  LocalityIndex index;
  for (const std::string& dataset : request.datasets) {
    absl::StatusOr<v1::LocateResponse> locate = locator(dataset);
    if (locate.ok()) {
      index.Add(*locate);
    } else if (absl::IsNotFound(locate.status())) {
      GRANARY_LOG(INFO) << "dataset '" << dataset << "' is unknown to the cluster; ignored";
    } else {
      GRANARY_LOG(WARNING) << "cannot locate dataset '" << dataset
                           << "', answering neutrally: " << locate.status().message();
      return LocalityIndex();
    }
  }
  return index;
}

std::string Dump(const json& reply) {
  return reply.dump(-1, ' ', /*ensure_ascii=*/false, json::error_handler_t::replace);
}

std::string Percent(double share) { return absl::StrCat(std::floor(share * 100), "%"); }

}  // namespace

Extender::Extender(Locator locator, ExtenderOptions options)
    : locator_(std::move(locator)), options_(options) {}

absl::StatusOr<std::string> Extender::Filter(std::string_view body) const {
  absl::StatusOr<Args> args = ParseArgs(body);
  if (!args.ok()) return args.status();
  PodRequest request = ReadPodRequest(args->pod);
  LocalityIndex index;
  if (request.locality_required) index = Locate(locator_, request);

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
                      absl::StrJoin(request.datasets, ", "))
                : absl::StrCat("granary: cache group '", locality.group, "' holds ",
                               Percent(locality.group_share), " of ",
                               absl::StrJoin(request.datasets, ", "), "; the pod requires ",
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
  return Dump(reply);
}

absl::StatusOr<std::string> Extender::Prioritize(std::string_view body) const {
  absl::StatusOr<Args> args = ParseArgs(body);
  if (!args.ok()) return args.status();
  LocalityIndex index = Locate(locator_, ReadPodRequest(args->pod));
  // Written directly: a json object per host costs more than the scoring.
  std::string reply = "[";
  for (const std::string& name : args->names) {
    if (reply.size() > 1) reply += ',';
    absl::StrAppend(&reply, "{\"Host\":", AsAbsl(Dump(name)), ",\"Score\":", index.Of(name).score,
                    "}");
  }
  reply += ']';
  return reply;
}

}  // namespace granary::hooks
