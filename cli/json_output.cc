#include "cli/json_output.h"

#include <iostream>
#include <optional>
#include <string>

#include "cli/format.h"
#include "common/chunk_key.h"

namespace granary::cli {
namespace {

nlohmann::json OptionalRatio(std::optional<double> ratio) {
  if (!ratio) return nullptr;
  return *ratio;
}

nlohmann::json FillJson(const v1::FillProgress& fill) {
  const v1::PrewarmProgress& progress = fill.progress();
  return {
      {"name", fill.name()},
      {"version", FormatVersion(fill.version())},
      {"finished", progress.finished()},
      {"percent", 100 * Fraction(progress.bytes_done(), progress.bytes_total())},
      {"bytes_done", progress.bytes_done()},
      {"bytes_total", progress.bytes_total()},
      {"bytes_per_second", progress.bytes_per_second()},
  };
}

nlohmann::json FillsJson(const google::protobuf::RepeatedPtrField<v1::FillProgress>& fills) {
  nlohmann::json listed = nlohmann::json::array();
  for (const v1::FillProgress& fill : fills) listed.push_back(FillJson(fill));
  return listed;
}

}  // namespace

nlohmann::json DatasetJson(const v1::DatasetInfo& dataset) {
  nlohmann::json older = nlohmann::json::array();
  for (uint64_t version : dataset.older_versions()) older.push_back(FormatVersion(version));
  return {
      {"name", dataset.name()},
      {"source", dataset.source()},
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

nlohmann::json StatusJson(const v1::StatusResponse& status) {
  nlohmann::json nodes = nlohmann::json::array();
  uint64_t hits = 0;
  uint64_t misses = 0;
  for (const v1::NodeStatus& node : status.nodes()) {
    hits += node.hits();
    misses += node.misses();
    nodes.push_back({
        {"node_id", node.node_id()},
        {"group", node.group()},
        {"address", node.address()},
        {"state", node.state()},
        {"capacity_bytes", node.capacity_bytes()},
        {"used_bytes", node.used_bytes()},
        {"chunk_count", node.chunk_count()},
        {"hits", node.hits()},
        {"misses", node.misses()},
        {"hit_ratio", OptionalRatio(HitRatio(node.hits(), node.misses()))},
        {"bytes_from_cache", node.bytes_from_cache()},
        {"bytes_from_source", node.bytes_from_source()},
        {"checksum_failures", node.checksum_failures()},
        {"io_engine", node.io_engine()},
        {"uptime_seconds", node.uptime_seconds()},
        {"fills", FillsJson(node.fills())},
    });
  }
  return {
      {"nodes", std::move(nodes)},
      {"dataset_count", status.dataset_count()},
      {"hits", hits},
      {"misses", misses},
      {"hit_ratio", OptionalRatio(HitRatio(hits, misses))},
  };
}

nlohmann::json LocateJson(const v1::LocateResponse& locate) {
  nlohmann::json nodes = nlohmann::json::array();
  for (const v1::NodeLocality& node : locate.nodes()) {
    nodes.push_back({
        {"node_id", node.node_id()},
        {"group", node.group()},
        {"cached_bytes", node.cached_bytes()},
        {"node_fraction", node.node_fraction()},
        {"group_fraction", node.group_fraction()},
        {"fill", node.has_fill() ? FillJson(node.fill()) : nlohmann::json()},
    });
  }
  nlohmann::json groups = nlohmann::json::array();
  for (const v1::GroupLocality& group : locate.groups()) {
    groups.push_back({
        {"group", group.group()},
        {"cached_bytes", group.cached_bytes()},
        {"fraction", group.fraction()},
    });
  }
  return {
      {"name", locate.name()},
      {"version", FormatVersion(locate.version())},
      {"total_bytes", locate.total_bytes()},
      {"replicas", locate.replicas()},
      {"nodes", std::move(nodes)},
      {"groups", std::move(groups)},
  };
}

nlohmann::json PrewarmJson(std::string_view name, const v1::PrewarmProgress& progress,
                           double seconds) {
  nlohmann::json failures = nlohmann::json::array();
  for (const v1::FileFailure& failure : progress.failures()) {
    failures.push_back({{"path", failure.path()}, {"error", failure.error()}});
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

void PrintJson(const nlohmann::json& document) { std::cout << document.dump(2) << '\n'; }

}  // namespace granary::cli
