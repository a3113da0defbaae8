#include "cli/json_output.h"

#include <iostream>
#include <string>

#include "cli/format.h"
#include "common/dataset/chunk_key.h"

namespace granary::cli {

nlohmann::json DatasetJson(const v1::DatasetInfo& dataset) {
  nlohmann::json older = nlohmann::json::array();
  for (uint64_t version : dataset.older_versions()) older.push_back(FormatVersion(version));
  nlohmann::json skipped = nlohmann::json::array();
  for (const v1::SkippedEntry& entry : dataset.skipped()) {
    skipped.push_back({{"path", JsonName(entry.path())}, {"reason", entry.reason()}});
  }
  return {
      {"name", dataset.name()},
      {"source", JsonName(dataset.source())},
      {"version", FormatVersion(dataset.version())},
      {"chunk_size", dataset.chunk_size()},
      {"replicas", dataset.replicas()},
      {"fill", FillPolicyName(dataset.fill())},
      {"file_count", dataset.file_count()},
      {"directory_count", dataset.directory_count()},
      {"total_bytes", dataset.total_bytes()},
      {"chunk_count", dataset.chunk_count()},
      {"created_unix_ms", dataset.created_unix_ms()},
      {"older_versions", std::move(older)},
      {"skipped", std::move(skipped)},
      {"skipped_count", dataset.skipped_count()},
      {"owner_only_count", dataset.owner_only_count()},
      {"cached_bytes", dataset.cached_bytes()},
      {"cached_fraction", Fraction(dataset.cached_bytes(), dataset.total_bytes())},
  };
}

nlohmann::json DatasetListJson(const v1::ListDatasetsResponse& response) {
  nlohmann::json datasets = nlohmann::json::array();
  for (const v1::DatasetInfo& dataset : response.datasets()) {
    datasets.push_back(DatasetJson(dataset));
  }
  return {{"datasets", std::move(datasets)}};
}

nlohmann::json RemovedDatasetJson(std::string_view name,
                                  const v1::RemoveDatasetResponse& response) {
  return {{"name", name}, {"removed", true}, {"freed_bytes", response.freed_bytes()}};
}

nlohmann::json PrewarmJson(std::string_view name, const v1::PrewarmProgress& progress,
                           double seconds) {
  nlohmann::json failures = nlohmann::json::array();
  for (const v1::FileFailure& failure : progress.failures()) {
    failures.push_back({{"path", JsonName(failure.path())}, {"error", failure.error()}});
  }
  return {
      {"name", name},
      {"finished", progress.finished()},
      {"percent", 100 * Fraction(progress.bytes_done(), progress.bytes_total())},
      {"bytes_done", progress.bytes_done()},
      {"bytes_total", progress.bytes_total()},
      {"chunks_done", progress.chunks_done()},
      {"chunks_total", progress.chunks_total()},
      {"chunks_already_cached", progress.chunks_already_cached()},
      {"nodes", progress.nodes()},
      {"seconds", seconds},
      {"bytes_per_second", progress.bytes_per_second()},
      {"failures", std::move(failures)},
  };
}

void PrintJson(const nlohmann::json& document) { std::cout << FormatJson(document) << '\n'; }

}  // namespace granary::cli
