#include "scheduler_hooks/extender.h"

#include <cmath>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/absl_compat.h"
#include "common/kubernetes_names.h"
#include "common/logging.h"
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

absl::StatusOr<Args> ParseArgs(std::string_view body) {
  absl::StatusOr<json> object = ParseJsonObject(body, "ExtenderArgs");
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

// The parts of an ExtenderArgs that Prioritize needs (the pod's Granary
// annotations and volumes, and the candidate names), read with nlohmann's SAX
// interface:
// a full NodeList is thousands of Node objects that a DOM would build only to
// drop. Checks as ParseArgs does, with the same messages.
class NamesSax {
 public:
  using number_integer_t = json::number_integer_t;
  using number_unsigned_t = json::number_unsigned_t;
  using number_float_t = json::number_float_t;
  using string_t = json::string_t;
  using binary_t = json::binary_t;

  bool null() { return Value(kNull); }
  bool boolean(bool) { return Value(kScalar); }
  bool number_integer(number_integer_t) { return Value(kScalar); }
  bool number_unsigned(number_unsigned_t) { return Value(kScalar); }
  bool number_float(number_float_t, const string_t&) { return Value(kScalar); }
  bool binary(binary_t&) { return Value(kScalar); }
  bool string(string_t& value) { return Value(kString, &value); }
  bool start_object(size_t) { return Open(kObject); }
  bool start_array(size_t) { return Open(kArray); }
  bool key(string_t& key) {
    frames_.back().key = std::move(key);
    return true;
  }
  bool end_object() { return Close(); }
  bool end_array() { return Close(); }
  bool parse_error(size_t, const std::string&, const nlohmann::detail::exception&) {
    malformed_ = true;
    return false;
  }

  // The checked Args (with a pod holding only what ReadPodRequest reads: the
  // Granary annotations and the CSI volumes' drivers and datasets).
  absl::StatusOr<Args> Finish() {
    if (too_deep_) return TooDeep();
    if (malformed_ || !root_object_) {
      return absl::InvalidArgumentError("request body is not a JSON ExtenderArgs object");
    }
    Args args;
    if (!annotations_.empty()) args.pod["metadata"]["annotations"] = std::move(annotations_);
    if (!volumes_.empty()) args.pod["spec"]["volumes"] = std::move(volumes_);
    if (names_present_) {
      if (!names_is_list_)
        return absl::InvalidArgumentError("ExtenderArgs.NodeNames is not a list");
      if (names_non_string_) {
        return absl::InvalidArgumentError("ExtenderArgs.NodeNames holds a non-string");
      }
      args.names = std::move(names_);
      args.by_name = true;
      return args;
    }
    if (!nodes_present_) {
      return absl::InvalidArgumentError("ExtenderArgs has neither Nodes nor NodeNames");
    }
    if (!nodes_is_list_) return absl::InvalidArgumentError("ExtenderArgs.Nodes is not a NodeList");
    if (items_not_list_) {
      return absl::InvalidArgumentError("ExtenderArgs.Nodes.items is not a list");
    }
    if (item_without_name_) {
      return absl::InvalidArgumentError("a node in ExtenderArgs.Nodes has no metadata.name");
    }
    args.names = std::move(item_names_);
    return args;
  }

 private:
  enum Type { kNull, kScalar, kString, kObject, kArray };
  // Where a container sits in ExtenderArgs; kOther for what is skipped.
  enum Place {
    kOther,
    kRoot,
    kPod,
    kPodMetadata,
    kAnnotations,
    kPodSpec,
    kVolumes,
    kVolume,
    kVolumeCsi,
    kVolumeAttributes,
    kNodeNames,
    kNodes,
    kItems,
    kItem,
    kItemMetadata
  };
  struct Frame {
    Place place;
    std::string key;     // The current key, in an object.
    bool named = false;  // A node: its metadata.name, once read.
    std::string name;
  };

  // A value of `type` at the current position; the place of a container.
  Place Arrive(Type type, std::string* text) {
    if (frames_.empty()) {
      if (type == kObject) root_object_ = true;
      return type == kObject ? kRoot : kOther;
    }
    Frame& parent = frames_.back();
    const std::string& key = parent.key;
    switch (parent.place) {
      case kRoot:
        if (key == "Pod") return type == kObject ? kPod : kOther;
        if (key == "NodeNames") {
          names_present_ = type != kNull;
          names_is_list_ = type == kArray;
          names_.clear();
          names_non_string_ = false;
          return type == kArray ? kNodeNames : kOther;
        }
        if (key == "Nodes") {
          nodes_present_ = type != kNull;
          nodes_is_list_ = type == kObject;
          item_names_.clear();
          items_not_list_ = item_without_name_ = false;
          return type == kObject ? kNodes : kOther;
        }
        return kOther;
      case kPod:
        if (type != kObject) return kOther;
        if (key == "metadata") return kPodMetadata;
        return key == "spec" ? kPodSpec : kOther;
      case kPodMetadata:
        if (key == "annotations") {
          annotations_ = json::object();
          return type == kObject ? kAnnotations : kOther;
        }
        return kOther;
      case kAnnotations:
        if (key == kDatasetsAnnotation || key == kLocalityAnnotation) {
          Keep(annotations_, key, type, text);
        }
        return kOther;
      case kPodSpec:
        if (key != "volumes") return kOther;
        volumes_ = json::array();
        return type == kArray ? kVolumes : kOther;
      case kVolumes:
        if (type != kObject) return kOther;
        volumes_.push_back(json::object());
        return kVolume;
      case kVolume:
        if (key != "csi") return kOther;
        volumes_.back()["csi"] = json::object();
        return type == kObject ? kVolumeCsi : kOther;
      case kVolumeCsi:
        if (key == "driver") {
          Keep(volumes_.back()["csi"], key, type, text);
        } else if (key == "volumeAttributes") {
          volumes_.back()["csi"][key] = json::object();
          return type == kObject ? kVolumeAttributes : kOther;
        }
        return kOther;
      case kVolumeAttributes:
        if (key == kDatasetAttribute)
          Keep(volumes_.back()["csi"]["volumeAttributes"], key, type, text);
        return kOther;
      case kNodeNames:
        if (type == kString) {
          names_.push_back(std::move(*text));
        } else {
          names_non_string_ = true;
        }
        return kOther;
      case kNodes:
        if (key == "items") {
          item_names_.clear();
          items_not_list_ = type != kNull && type != kArray;
          item_without_name_ = false;
          return type == kArray ? kItems : kOther;
        }
        return kOther;
      case kItems:
        if (type != kObject) item_without_name_ = true;
        return type == kObject ? kItem : kOther;
      case kItem:
        if (key != "metadata") return kOther;
        // A key given twice keeps its last value, as in ParseArgs's DOM.
        parent.named = false;
        return type == kObject ? kItemMetadata : kOther;
      case kItemMetadata:
        if (key == "name") {
          // The item's frame is below this one.
          Frame& item = frames_[frames_.size() - 2];
          item.named = type == kString;
          if (item.named) item.name = std::move(*text);
        }
        return kOther;
      case kOther:
        return kOther;
    }
    return kOther;
  }

  // Sets `object[key]` to a string value, and drops it for any other: a key
  // given twice keeps its last value, as in ParseArgs's DOM.
  static void Keep(json& object, const std::string& key, Type type, std::string* text) {
    if (type == kString) {
      object[key] = std::move(*text);
    } else {
      object.erase(key);
    }
  }

  bool Value(Type type, std::string* text = nullptr) {
    Arrive(type, text);
    return true;
  }
  bool Open(Type type) {
    if (frames_.size() > kMaxJsonDepth) {
      too_deep_ = true;
      return false;  // Stops the parse.
    }
    frames_.push_back({Arrive(type, nullptr), {}, false, {}});
    return true;
  }
  bool Close() {
    Frame& closed = frames_.back();
    if (closed.place == kItem) {
      if (closed.named) {
        item_names_.push_back(std::move(closed.name));
      } else {
        item_without_name_ = true;
      }
    }
    frames_.pop_back();
    return true;
  }

  std::vector<Frame> frames_;
  bool too_deep_ = false;
  bool malformed_ = false;
  bool root_object_ = false;
  json annotations_ = json::object();
  json volumes_ = json::array();
  bool names_present_ = false, names_is_list_ = false, names_non_string_ = false;
  std::vector<std::string> names_;
  bool nodes_present_ = false, nodes_is_list_ = false, items_not_list_ = false,
       item_without_name_ = false;
  std::vector<std::string> item_names_;
};

// ParseArgs without the NodeList's objects (args.node_list stays null).
absl::StatusOr<Args> ParseNames(std::string_view body) {
  NamesSax sax;
  json::sax_parse(body, &sax, json::input_format_t::json, /*strict=*/true);
  return sax.Finish();
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
  absl::StatusOr<Args> args = ParseArgs(body);
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
  absl::StatusOr<Args> args = ParseNames(body);
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
