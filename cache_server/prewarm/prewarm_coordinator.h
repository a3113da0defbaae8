// PrewarmCoordinator carries out one Prewarm request on this node: it checks
// the request's limits, and then fetches this node's share of the dataset
// (owned_share_only, or when the node is alone in its group) with a
// PrewarmJob, or coordinates the whole cache group with a GroupPrewarm. In
// both cases `report` receives progress every kProgressInterval and a final
// message with finished=true.
//
// Errors name what was wrong: INVALID_ARGUMENT for a parallelism or a path
// count over the limits or a share asked of the wrong group, NOT_FOUND for an
// unknown dataset or path, CANCELLED once `cancelled` answers true or `report`
// answers false (the client went away); the workers stop then.
//
// Thread-safety: Run() may be called from many threads at once; `report` and
// `cancelled` are called from the thread that called it.
#ifndef GRANARY_CACHE_SERVER_PREWARM_PREWARM_COORDINATOR_H_
#define GRANARY_CACHE_SERVER_PREWARM_PREWARM_COORDINATOR_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cache_server/catalog/catalog.h"
#include "cache_server/catalog/version_activity.h"
#include "cache_server/cluster/cluster_view.h"
#include "cache_server/metrics.h"
#include "cache_server/read_path/read_through.h"
#include "cache_server/store/chunk_store.h"
#include "common/manifest.h"
#include "proto/granary.pb.h"

namespace granary {

class PrewarmCoordinator {
 public:
  static constexpr std::chrono::milliseconds kProgressInterval{100};
  static constexpr unsigned kMaxParallelism = 256;

  // What a prewarm works with; owned by the server.
  struct Parts {
    Catalog* catalog;
    ReadThrough* read_through;
    store::ChunkStore* store;
    PrewarmMetrics* metrics;
    VersionActivity* activity;
    ClusterView* cluster;
  };
  // Answers false once the progress cannot be delivered.
  using Report = std::function<bool(const v1::PrewarmProgress&)>;
  using Cancelled = std::function<bool()>;

  // `default_parallelism`: workers of a request that names none;
  // `max_paths`: the most paths one request may name.
  PrewarmCoordinator(Parts parts, unsigned default_parallelism, size_t max_paths);

  absl::Status Run(const v1::PrewarmRequest& request, const Report& report,
                   const Cancelled& cancelled) const;

 private:
  // The dataset's current manifest and the files a request selects.
  struct Plan {
    std::shared_ptr<const Manifest> manifest;
    std::vector<uint64_t> file_ids;
    uint32_t replicas = 1;  // Copies of each chunk in the group.
  };
  absl::StatusOr<Plan> PlanFor(const v1::PrewarmRequest& request) const;
  // This node's share of a group prewarm (or all of it, alone in its group).
  absl::Status RunLocalShare(const v1::PrewarmRequest& request, const Report& report,
                             const Cancelled& cancelled) const;

  const Parts parts_;
  const unsigned default_parallelism_;
  const size_t max_paths_;
};

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_PREWARM_PREWARM_COORDINATOR_H_
