#include "scheduler_hooks/pod_request.h"

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace granary::hooks {
namespace {

// The string value of annotation `key`, or "" when absent or not a string.
std::string Annotation(const nlohmann::json& pod, const char* key) {
  if (!pod.is_object()) return "";
  auto metadata = pod.find("metadata");
  if (metadata == pod.end() || !metadata->is_object()) return "";
  auto annotations = metadata->find("annotations");
  if (annotations == metadata->end() || !annotations->is_object()) return "";
  auto value = annotations->find(key);
  if (value == annotations->end() || !value->is_string()) return "";
  return value->get<std::string>();
}

}  // namespace

absl::StatusOr<PodRequest> ReadPodRequest(const nlohmann::json& pod, size_t max_datasets) {
  PodRequest request;
  std::string datasets = Annotation(pod, kDatasetsAnnotation);
  absl::flat_hash_set<absl::string_view> seen;
  for (absl::string_view part : absl::StrSplit(datasets, ',')) {
    absl::string_view name = absl::StripAsciiWhitespace(part);
    if (name.empty() || !seen.insert(name).second) continue;
    if (request.datasets.size() < max_datasets) request.datasets.emplace_back(name);
  }
  if (seen.size() > max_datasets) {
    return absl::InvalidArgumentError(absl::StrCat("annotation ", kDatasetsAnnotation, " names ",
                                                   seen.size(), " datasets; at most ", max_datasets,
                                                   " are allowed"));
  }
  std::string locality = Annotation(pod, kLocalityAnnotation);
  request.locality_required =
      absl::AsciiStrToLower(absl::StripAsciiWhitespace(locality)) == "required";
  return request;
}

}  // namespace granary::hooks
