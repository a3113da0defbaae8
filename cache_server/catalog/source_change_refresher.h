// SourceChangeRefresher refreshes, without anyone asking, a dataset whose
// source changed under it. A read that finds a file of the dataset's current
// version with only its metadata changed in the source (a chmod, a chown, an
// attribute, a new hard link: the read is served, VerifiedSourceFile) tells
// it (Notice). A thread of its own then refreshes the dataset
// (DatasetRegistry::Refresh), so that new opens and reads see the source's
// owners and modes as they are now -- a permission taken away is taken away
// from every version (GranaryService::AllowRead, FindCurrentEntry) -- hands
// the result on (`on_refreshed`: the server pushes the new version to its
// peers), and leaves an audit line: who (granaryd itself), what it refreshed
// and why, and the result.
//
// A file whose bytes changed (replaced, rewritten, gone) is not noticed:
// its reads fail with ESTALE until an administrator refreshes, who decides
// when a dataset's bytes move on.
//
// Each dataset is refreshed at most once per `min_interval`: notices in
// between wait for the next refresh, one per dataset however many came.
// Notices about a version that is no longer current are dropped, since a
// refresh already replaced it. What waits is bounded by the datasets.
//
// Thread-safety: Notice() may be called concurrently and never waits for a
// refresh; the destructor waits for a refresh under way and stops the
// thread.
#ifndef GRANARY_CACHE_SERVER_CATALOG_SOURCE_CHANGE_REFRESHER_H_
#define GRANARY_CACHE_SERVER_CATALOG_SOURCE_CHANGE_REFRESHER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "cache_server/catalog/catalog.h"
#include "cache_server/catalog/dataset_registry.h"
#include "common/base/mutex.h"
#include "common/dataset/manifest.h"

namespace granary {

class SourceChangeRefresher {
 public:
  // Called on the refresher's thread after each refresh that made a new
  // version current.
  using OnRefreshed = std::function<void()>;

  // `registry` and `catalog` must outlive the refresher.
  SourceChangeRefresher(DatasetRegistry* registry, const Catalog* catalog,
                        std::chrono::milliseconds min_interval, OnRefreshed on_refreshed);
  ~SourceChangeRefresher();
  SourceChangeRefresher(const SourceChangeRefresher&) = delete;
  SourceChangeRefresher& operator=(const SourceChangeRefresher&) = delete;

  // A read of file `path` of `version` found its metadata alone changed in
  // the source.
  void Notice(const Manifest& version, std::string_view path);

 private:
  using Clock = std::chrono::steady_clock;
  struct Noticed {
    uint64_t version = 0;
    std::string path;
  };

  void Run();
  // The next dataset whose refresh is due and what was noticed of it,
  // waiting for one; nothing once the refresher stops.
  std::optional<std::pair<std::string, Noticed>> NextDue();
  // Refreshes dataset `name` for `noticed`, unless its version is no longer
  // current.
  void Refresh(const std::string& name, const Noticed& noticed);

  DatasetRegistry* const registry_;
  const Catalog* const catalog_;
  const std::chrono::milliseconds min_interval_;
  const OnRefreshed on_refreshed_;
  Mutex mu_;
  CondVar wake_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // The first change noticed of each dataset since its last refresh, of
  // the latest version noticed.
  absl::flat_hash_map<std::string, Noticed> noticed_ ABSL_GUARDED_BY(mu_);
  // When each dataset noticed was last refreshed.
  absl::flat_hash_map<std::string, Clock::time_point> refreshed_at_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;  // Last: starts once the rest exists.
};

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_CATALOG_SOURCE_CHANGE_REFRESHER_H_
