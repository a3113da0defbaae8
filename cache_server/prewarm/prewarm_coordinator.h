// PrewarmCoordinator carries out one Prewarm request on this node: it checks
// the request's limits and its caller's permissions, and then fetches this
// node's share of the dataset (owned_share_only, or when the node is alone in
// its group) with a PrewarmJob, or coordinates the whole cache group with a
// GroupPrewarm. In both cases `report` receives progress every
// kProgressInterval and a final message with finished=true.
//
// Whom a prewarm is for decides what it may do. An administrator's prewarm
// (one who may administer, AccessPolicy: root or the admin group on the Unix
// socket) and a cluster member's warm every file asked, with the parallelism
// asked. A local caller who is not an administrator is bound by
// PrewarmLimits (parallelism, how many prewarms at once), warms only the
// files it may read (AccessPolicy::AllowRead; the others are left out, and
// one failure without a path says how many), and stops once what its
// prewarms hold on this node reaches its share of the cache (PrewarmShares).
// In a group prewarm for such a caller, the owners are asked for the files
// it may read by name.
//
// Errors name what was wrong: INVALID_ARGUMENT for a parallelism or a path
// count over the limits or a share asked of the wrong group, NOT_FOUND for an
// unknown dataset or path, PERMISSION_DENIED naming a file when the caller
// may read none of those asked, FAILED_PRECONDITION for a group prewarm of
// more files the caller may read than a request may name when it may not
// read them all, RESOURCE_EXHAUSTED naming the limit and its option when too
// many prewarms run (the dataset is then not marked in use) or, after the
// final progress, when the caller's share is full, CANCELLED once
// `cancelled` answers true or `report` answers false (the client went away);
// the workers stop then.
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
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cache_server/access/access_policy.h"
#include "cache_server/access/caller.h"
#include "cache_server/catalog/catalog.h"
#include "cache_server/catalog/version_activity.h"
#include "cache_server/cluster/cluster_view.h"
#include "cache_server/metrics.h"
#include "cache_server/prewarm/prewarm_limits.h"
#include "cache_server/prewarm/prewarm_shares.h"
#include "cache_server/read_path/read_through.h"
#include "cache_server/store/chunk_store.h"
#include "common/dataset/manifest.h"
#include "proto/granary.pb.h"

namespace granary {

class PrewarmCoordinator {
 public:
  static constexpr std::chrono::milliseconds kProgressInterval{100};

  // What a prewarm works with; owned by the server.
  struct Parts {
    Catalog* catalog;
    ReadThrough* read_through;
    store::ChunkStore* store;
    PrewarmMetrics* metrics;
    VersionActivity* activity;
    ClusterView* cluster;
    const AccessPolicy* policy;
  };
  struct Options {
    PrewarmLimits::Config limits;
    size_t max_paths = 10'000;  // The most paths one request may name.
    // What one user's prewarms may hold in the store, and how the config
    // says so ("prewarm_user_share: 0.25 of 200 GiB"), for messages.
    uint64_t user_share_bytes = 0;
    std::string user_share_text;
  };
  // Answers false once the progress cannot be delivered.
  using Report = std::function<bool(const v1::PrewarmProgress&)>;
  using Cancelled = std::function<bool()>;

  PrewarmCoordinator(Parts parts, Options options);

  absl::Status Run(const Caller& caller, const v1::PrewarmRequest& request, const Report& report,
                   const Cancelled& cancelled);

 private:
  // The dataset's current manifest and the files a request selects that the
  // prewarm's user (when it has one) may read.
  struct Plan {
    std::shared_ptr<const Manifest> manifest;
    std::vector<uint64_t> file_ids;
    // Files asked that the user may not read, left out; why the first was.
    uint64_t files_not_permitted = 0;
    absl::Status first_not_permitted;
    uint32_t replicas = 1;  // Copies of each chunk in the group.
  };
  // The caller whose limits, permissions and share bind the prewarm; none
  // for an administrator or a cluster member.
  std::optional<Caller> UserOf(const Caller& caller) const;
  absl::StatusOr<Plan> PlanFor(const std::optional<Caller>& user,
                               const v1::PrewarmRequest& request) const;
  // This node's share of a group prewarm (or all of it, alone in its group).
  absl::Status RunLocalShare(const std::optional<Caller>& user, const v1::PrewarmRequest& request,
                             const Report& report, const Cancelled& cancelled);
  // A group prewarm for `user`.
  absl::Status RunGroup(const std::optional<Caller>& user, v1::PrewarmRequest request,
                        const Report& report, const Cancelled& cancelled);

  const Parts parts_;
  const size_t max_paths_;
  PrewarmLimits limits_;
  PrewarmShares shares_;
};

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_PREWARM_PREWARM_COORDINATOR_H_
