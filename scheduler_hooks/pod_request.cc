#include "scheduler_hooks/pod_request.h"

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/scheduling/kubernetes_names.h"

namespace granary::hooks {
namespace {

using nlohmann::json;

// The member `key` of `object` when both are objects and it is of `type`,
// else null.
const json* Member(const json& object, const char* key, json::value_t type) {
  if (!object.is_object()) return nullptr;
  auto value = object.find(key);
  if (value == object.end() || value->type() != type) return nullptr;
  return &*value;
}

// The datasets of the pod's inline Granary CSI volumes, in order.
std::vector<std::string> VolumeDatasets(const json& pod) {
  std::vector<std::string> datasets;
  const json* spec = Member(pod, "spec", json::value_t::object);
  const json* volumes = spec ? Member(*spec, "volumes", json::value_t::array) : nullptr;
  if (volumes == nullptr) return datasets;
  for (const json& volume : *volumes) {
    const json* csi = Member(volume, "csi", json::value_t::object);
    const json* driver = csi ? Member(*csi, "driver", json::value_t::string) : nullptr;
    if (driver == nullptr || *driver != kDriverName) continue;
    const json* attributes = Member(*csi, "volumeAttributes", json::value_t::object);
    const json* dataset =
        attributes ? Member(*attributes, kDatasetAttribute, json::value_t::string) : nullptr;
    if (dataset != nullptr) datasets.push_back(dataset->get<std::string>());
  }
  return datasets;
}

// The string value of annotation `key`, or "" when absent or not a string.
std::string Annotation(const json& pod, const char* key) {
  const json* metadata = Member(pod, "metadata", json::value_t::object);
  const json* annotations =
      metadata ? Member(*metadata, "annotations", json::value_t::object) : nullptr;
  const json* value = annotations ? Member(*annotations, key, json::value_t::string) : nullptr;
  return value ? value->get<std::string>() : "";
}

}  // namespace

absl::StatusOr<PodRequest> ReadPodRequest(const json& pod, size_t max_datasets) {
  PodRequest request;
  std::vector<std::string> volumes = VolumeDatasets(pod);
  std::string annotation = Annotation(pod, kDatasetsAnnotation);
  std::vector<absl::string_view> names(volumes.begin(), volumes.end());
  for (absl::string_view part : absl::StrSplit(annotation, ',')) names.push_back(part);
  absl::flat_hash_set<absl::string_view> seen;
  for (absl::string_view part : names) {
    absl::string_view name = absl::StripAsciiWhitespace(part);
    if (name.empty() || !seen.insert(name).second) continue;
    if (request.datasets.size() < max_datasets) request.datasets.emplace_back(name);
  }
  if (seen.size() > max_datasets) {
    return absl::InvalidArgumentError(
        absl::StrCat("the pod names ", seen.size(), " datasets (Granary volumes and annotation ",
                     kDatasetsAnnotation, "); at most ", max_datasets, " are allowed"));
  }
  std::string locality = Annotation(pod, kLocalityAnnotation);
  request.locality_required =
      absl::AsciiStrToLower(absl::StripAsciiWhitespace(locality)) == "required";
  return request;
}

}  // namespace granary::hooks
