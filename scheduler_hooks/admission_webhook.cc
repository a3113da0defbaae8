#include "scheduler_hooks/admission_webhook.h"

#include <cmath>
#include <functional>
#include <map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/logging.h"
#include "common/base/printable.h"
#include "common/base/status.h"
#include "common/scheduling/kubernetes_names.h"
#include "nlohmann/json.hpp"
#include "scheduler_hooks/json_body.h"
#include "scheduler_hooks/locality.h"
#include "scheduler_hooks/pod_request.h"

namespace granary::hooks {
namespace {

using nlohmann::json;

constexpr char kApiVersion[] = "admission.k8s.io/v1";
constexpr char kReviewKind[] = "AdmissionReview";
// The API server refuses a node field selector naming more than one node
// (one value per metadata.name requirement), so each node is a term of its
// own; the nodes beyond these few hold little that their groups' terms do
// not already prefer.
constexpr size_t kMaxNodeTerms = 16;
// Label values: at most 63 characters, alphanumeric at both ends, '-', '_'
// and '.' between. A group named otherwise cannot be a node's label, and a
// term naming it would make the API server refuse the pod.
constexpr size_t kMaxLabelValue = 63;

bool IsLabelValue(const std::string& value) {
  if (value.empty() || value.size() > kMaxLabelValue) return false;
  auto alphanumeric = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  };
  for (char c : value) {
    if (!alphanumeric(c) && c != '-' && c != '_' && c != '.') return false;
  }
  return alphanumeric(value.front()) && alphanumeric(value.back());
}

const json* Member(const json& object, const char* key) {
  auto value = object.find(key);
  return value == object.end() || value->is_null() ? nullptr : &*value;
}

std::string StringMember(const json& object, const char* key) {
  const json* value = Member(object, key);
  return value != nullptr && value->is_string() ? value->get<std::string>() : "";
}

// The review's request, checked to be one of admission.k8s.io/v1 with a uid.
absl::StatusOr<const json*> CheckReview(const json& review) {
  const std::string api_version = StringMember(review, "apiVersion");
  const std::string kind = StringMember(review, "kind");
  if (kind != kReviewKind) {
    return absl::InvalidArgumentError(
        absl::StrCat("request body is a '", Printable(kind), "', not an ", kReviewKind));
  }
  if (api_version != kApiVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat("AdmissionReview apiVersion is '", Printable(api_version),
                     "'; this webhook speaks ", kApiVersion, " (admissionReviewVersions: [v1])"));
  }
  const json* request = Member(review, "request");
  if (request == nullptr || !request->is_object()) {
    return absl::InvalidArgumentError("AdmissionReview has no request object");
  }
  if (StringMember(*request, "uid").empty()) {
    return absl::InvalidArgumentError("AdmissionReview.request has no uid");
  }
  return request;
}

// Whether the request creates a pod (core/v1 Pod, operation CREATE).
bool CreatesPod(const json& request) {
  const json* kind = Member(request, "kind");
  return kind != nullptr && kind->is_object() && StringMember(*kind, "group").empty() &&
         StringMember(*kind, "version") == "v1" && StringMember(*kind, "kind") == "Pod" &&
         StringMember(request, "operation") == "CREATE";
}

// "namespace/name" of the pod, for log lines; a pod that a controller
// creates has only the prefix of its name yet.
std::string PodName(const json& request, const json& pod) {
  const json* metadata = Member(pod, "metadata");
  std::string name;
  if (metadata != nullptr && metadata->is_object()) {
    name = StringMember(*metadata, "name");
    if (name.empty()) name = StringMember(*metadata, "generateName") + "*";
  }
  return Printable(absl::StrCat(StringMember(request, "namespace"), "/", name));
}

bool HasOwnNodeAffinity(const json& spec) {
  const json* affinity = Member(spec, "affinity");
  return affinity != nullptr && affinity->is_object() && Member(*affinity, "nodeAffinity");
}

int Weight(double part, double share) {
  return static_cast<int>(std::lround(kMaxTermWeight * part * share));
}

// One preferred term per weight, matching the groups of that weight by the
// node label of their cache group.
void AddGroupTerms(const std::vector<LocalityIndex::Share>& groups, json& terms) {
  std::map<int, std::vector<std::string>, std::greater<>> by_weight;
  for (const LocalityIndex::Share& group : groups) {
    const int weight = Weight(kGroupWeight, group.share);
    if (weight <= 0) continue;
    if (!IsLabelValue(group.name)) {
      GRANARY_LOG_FIRST_N(WARNING, 10)
          << "cache group '" << Printable(group.name)
          << "' is not a valid node label value; pods are not given affinity towards it";
      continue;
    }
    by_weight[weight].push_back(group.name);
  }
  for (auto& [weight, values] : by_weight) {
    terms.push_back({{"weight", weight},
                     {"preference",
                      {{"matchExpressions", json::array({{{"key", kGroupTopologyKey},
                                                          {"operator", "In"},
                                                          {"values", values}}})}}}});
  }
}

// One preferred term per node, matching its name, largest share first.
void AddNodeTerms(const std::vector<LocalityIndex::Share>& nodes, json& terms) {
  size_t added = 0;
  for (const LocalityIndex::Share& node : nodes) {
    const int weight = Weight(kNodeWeight, node.share);
    if (weight <= 0 || added == kMaxNodeTerms) break;
    terms.push_back({{"weight", weight},
                     {"preference",
                      {{"matchFields", json::array({{{"key", "metadata.name"},
                                                     {"operator", "In"},
                                                     {"values", json::array({node.name})}}})}}}});
    ++added;
  }
}

json Answer(const std::string& uid, const json& patch) {
  json response = {{"uid", uid}, {"allowed", true}};
  if (!patch.is_null()) {
    response["patchType"] = "JSONPatch";
    response["patch"] = absl::Base64Escape(DumpJson(patch));
  }
  return {{"apiVersion", kApiVersion}, {"kind", kReviewKind}, {"response", std::move(response)}};
}

}  // namespace

AdmissionWebhook::AdmissionWebhook(Locator locator, Prewarm prewarm,
                                   AdmissionWebhookOptions options)
    : locator_(std::move(locator)), prewarm_(std::move(prewarm)), options_(options) {}

absl::StatusOr<std::string> AdmissionWebhook::Review(std::string_view body) const {
  GRANARY_ASSIGN_OR_RETURN(json review, ParseJsonObject(body, kReviewKind));
  GRANARY_ASSIGN_OR_RETURN(const json* request, CheckReview(review));
  const std::string uid = StringMember(*request, "uid");
  if (!CreatesPod(*request)) return DumpJson(Answer(uid, nullptr));
  const json* pod = Member(*request, "object");
  const json* spec = pod != nullptr && pod->is_object() ? Member(*pod, "spec") : nullptr;
  if (spec == nullptr || !spec->is_object()) {
    return absl::InvalidArgumentError("AdmissionReview.request.object is not a Pod with a spec");
  }
  const std::string who = PodName(*request, *pod);

  absl::StatusOr<PodRequest> wanted = ReadPodRequest(*pod, options_.max_datasets_per_pod);
  if (!wanted.ok()) {
    GRANARY_LOG(WARNING) << "pod " << who
                         << " admitted without node affinity: " << wanted.status().message();
    return DumpJson(Answer(uid, nullptr));
  }
  if (wanted->datasets.empty()) return DumpJson(Answer(uid, nullptr));
  if (HasOwnNodeAffinity(*spec)) {
    GRANARY_LOG(INFO) << "pod " << who << " sets its own node affinity; left as it is";
    return DumpJson(Answer(uid, nullptr));
  }
  absl::StatusOr<LocalityIndex> index = LocateDatasets(locator_, wanted->datasets);
  if (!index.ok()) {
    GRANARY_LOG(WARNING) << "pod " << who
                         << " admitted without node affinity: " << index.status().message();
    return DumpJson(Answer(uid, nullptr));
  }
  const std::vector<LocalityIndex::Share> groups = index->GroupShares();
  json terms = json::array();
  AddGroupTerms(groups, terms);
  AddNodeTerms(index->NodeShares(), terms);
  const std::string datasets = Printable(absl::StrJoin(wanted->datasets, ", "));
  if (terms.empty()) {
    GRANARY_LOG(INFO) << "pod " << who << " admitted without node affinity: no cache holds "
                      << datasets << " yet";
    return DumpJson(Answer(uid, nullptr));
  }

  std::vector<std::string> warmed;
  const bool dry_run = Member(*request, "dryRun") != nullptr && (*request)["dryRun"] == true;
  for (size_t i = 0; i < groups.size() && i < options_.prewarm_groups && !dry_run; ++i) {
    if (groups[i].share >= 1 || Weight(kGroupWeight, groups[i].share) <= 0) continue;
    for (const std::string& dataset : wanted->datasets) prewarm_(dataset, groups[i].name);
    warmed.push_back(groups[i].name);
  }
  GRANARY_LOG(INFO) << "pod " << who << " reads " << datasets << ": " << terms.size()
                    << " preferred node affinity terms"
                    << (warmed.empty() ? "" : ", prewarming group ")
                    << Printable(absl::StrJoin(warmed, ", "));

  json node_affinity = {{"preferredDuringSchedulingIgnoredDuringExecution", std::move(terms)}};
  const json* affinity = Member(*spec, "affinity");
  json patch = affinity != nullptr && affinity->is_object()
                   ? json::array({{{"op", "add"},
                                   {"path", "/spec/affinity/nodeAffinity"},
                                   {"value", std::move(node_affinity)}}})
                   : json::array({{{"op", "add"},
                                   {"path", "/spec/affinity"},
                                   {"value", {{"nodeAffinity", std::move(node_affinity)}}}}});
  return DumpJson(Answer(uid, patch));
}

}  // namespace granary::hooks
