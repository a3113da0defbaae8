#include "scheduler_hooks/pod_request.h"

#include <algorithm>

#include "absl/strings/ascii.h"
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

PodRequest ReadPodRequest(const nlohmann::json& pod) {
  PodRequest request;
  std::string datasets = Annotation(pod, kDatasetsAnnotation);
  for (absl::string_view part : absl::StrSplit(datasets, ',')) {
    std::string name(absl::StripAsciiWhitespace(part));
    if (name.empty() || std::ranges::find(request.datasets, name) != request.datasets.end()) {
      continue;
    }
    request.datasets.push_back(std::move(name));
  }
  std::string locality = Annotation(pod, kLocalityAnnotation);
  request.locality_required =
      absl::AsciiStrToLower(absl::StripAsciiWhitespace(locality)) == "required";
  return request;
}

}  // namespace granary::hooks
