#include "cache_server/status/status_page.h"

#include <atomic>
#include <string>
#include <utility>

#include "cache_server/status/jobs_service.h"
#include "cache_server/status/status_page_html.h"  // Generated from status_page.html.
#include "common/base/wall_clock.h"
#include "common/reports/json_documents.h"

namespace granary {

void StatusPage::Register(HttpServer& server) const {
  server.Handle("GET", "/", [](const HttpRequest&) {
    return HttpResponse{.content_type = "text/html; charset=utf-8", .body = kStatusPageHtml};
  });
  server.Handle("GET", "/status.json", [this](const HttpRequest&) {
    return HttpResponse{.content_type = "application/json", .body = FormatJson(Document())};
  });
}

nlohmann::json StatusPage::Document() const {
  const Member& self = parts_.cluster->self();
  nlohmann::json status = StatusJson(parts_.status->Status(/*local_only=*/true));
  // What only authenticated callers get: where the node listens, and why a
  // manifest would not load (RocksDB's errors may name the catalog's files).
  for (nlohmann::json& node : status["nodes"]) {
    node.erase("address");
    for (nlohmann::json& unloadable : node["unloadable_datasets"]) unloadable.erase("error");
  }
  nlohmann::json datasets = nlohmann::json::array();
  for (const v1::CatalogDataset& dataset : parts_.catalog->List()) {
    absl::StatusOr<v1::LocateResponse> located =
        parts_.status->Locate(dataset.name(), /*local_only=*/false, /*fresh=*/false);
    // A dataset removed since the listing is no longer the page's to show.
    if (located.ok()) datasets.push_back(LocateJson(*located));
  }
  v1::ListHoldsResponse holds;
  *holds.add_nodes() = parts_.holds->List();
  const PrewarmMetrics& prewarm = parts_.metrics->prewarm;
  return {
      {"node_id", self.id},
      {"group", self.group},
      {"generated_unix_ms", NowUnixMs()},
      {"status", std::move(status)},
      {"datasets", std::move(datasets)},
      {"jobs", JobsJson(JobsListing(*parts_.jobs, self))},
      {"holds", HoldsJson(holds)},
      {"prewarms",
       {{"running", prewarm.running.load(std::memory_order_relaxed)},
        {"bytes_remaining", prewarm.bytes_remaining.load(std::memory_order_relaxed)},
        {"bytes_fetched", prewarm.bytes_fetched.load(std::memory_order_relaxed)}}},
  };
}

}  // namespace granary
