// StatusPage is what people open first: a page at `/` on granaryd's HTTP port
// (beside /metrics) showing this node and its group, the datasets with the
// share of each cached in every group, the jobs reading here and what they
// waited for by origin, the holds, and the fills and prewarms in progress.
// The page is static HTML, CSS and JavaScript compiled into granaryd (no
// external asset); it reloads /status.json every few seconds and draws every
// name it holds (datasets, jobs, holders, groups) as text, never as markup.
//
// /status.json is one JSON document made of what the gRPC services answer
// for this node (Status and ListHolds asked for this node only, Locate from
// published reports, ListJobs), in the documents the CLI prints for them
// (common/reports/json_documents.h):
//   {"node_id", "group", "generated_unix_ms",
//    "status":   StatusJson of this node (without its address, nor the
//                errors of manifests that would not load),
//    "datasets": [LocateJson of each dataset, from the members' published
//                 locality reports],
//    "jobs":     JobsJson of this node's jobs,
//    "holds":    HoldsJson of this node's holds,
//    "prewarms": {"running", "bytes_remaining", "bytes_fetched"}}
//
// The HTTP port takes no token (README.md, "The status page"): the page is
// this node's own view, built without a call to any peer, so a request costs
// the node local work only, as a scrape of /metrics does; it names datasets,
// jobs, holders, groups and members, and never sources, paths or addresses.
//
// Thread-safety: Document() and the handlers may be called concurrently;
// every part is thread-safe.
#ifndef GRANARY_CACHE_SERVER_STATUS_STATUS_PAGE_H_
#define GRANARY_CACHE_SERVER_STATUS_STATUS_PAGE_H_

#include "cache_server/catalog/catalog.h"
#include "cache_server/cluster/cluster_view.h"
#include "cache_server/holds/hold_table.h"
#include "cache_server/metrics.h"
#include "cache_server/status/cluster_status.h"
#include "common/jobs/job_reads.h"
#include "common/net/http.h"
#include "nlohmann/json.hpp"

namespace granary {

class StatusPage {
 public:
  // What the page shows; owned by the server, outliving the page.
  struct Parts {
    const Catalog* catalog;
    const ClusterStatus* status;
    JobLedger* jobs;
    const HoldTable* holds;
    const ServerMetrics* metrics;
    const ClusterView* cluster;
  };

  explicit StatusPage(Parts parts) : parts_(parts) {}

  // Serves `/` and `/status.json` on `server` (before it starts).
  void Register(HttpServer& server) const;

  // The document /status.json answers.
  nlohmann::json Document() const;

 private:
  const Parts parts_;
};

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_STATUS_STATUS_PAGE_H_
