// FillScheduler fills a dataset version in the background once a reader has
// missed in it: a job that starts before anyone ran `granary prewarm` then
// reads at the source's full rate even when its own readers ask for one file
// at a time, and its next epoch reads from NVMe. A fill is a PrewarmJob of
// the version's whole share on this node (in a cluster, the chunks this node
// owns in its group: each owner fills its own share, and only owners read the
// source), with:
//  - the chunks after each miss first (the rest of the file, then the files
//    after it in its directory: what readers that walk a directory open next);
//  - while readers miss (or did within kReadersQuietPeriod), only those
//    chunks: the rest of the dataset waits until they stop missing, since
//    fetching it then would only share the source's bandwidth with them;
//    and the same while they read the version from the cache (or did within
//    kReadersReadingPeriod), whose disk and CPUs a fill would share: a
//    dataset holding more than a job reads is filled once the job stops
//    reading it, not beside its next epochs;
//  - as many workers held back as readers wait on misses of their own (but
//    one that always runs), so that fill and readers together keep no more
//    reads at the source than the fill's parallelism: the fill never starves
//    the readers;
//  - an end when the version is removed or refreshed away.
// The policy is the dataset's (`granary dataset add --fill on-read|none`),
// else the node's default (config `fill`). A fill runs once per version per
// process; a finished one is listed until its version goes, without holding
// the version's manifest (PrewarmJob lets go of it), which the catalog may
// then drop from memory.
//
// Thread-safety: every method may be called concurrently.
#ifndef GRANARY_CACHE_SERVER_PREWARM_FILL_SCHEDULER_H_
#define GRANARY_CACHE_SERVER_PREWARM_FILL_SCHEDULER_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "cache_server/catalog/catalog.h"
#include "cache_server/catalog/version_activity.h"
#include "cache_server/cluster/cluster_view.h"
#include "cache_server/metrics.h"
#include "cache_server/prewarm/prewarm_job.h"
#include "cache_server/read_path/read_through.h"
#include "cache_server/store/chunk_store.h"
#include "common/base/mutex.h"
#include "common/dataset/manifest.h"
#include "proto/granary.pb.h"

namespace granary {

class FillScheduler {
 public:
  struct Options {
    // Reads at the source of a fill and its readers' misses together: the
    // config's fill_parallelism, whose default is the one default.
    unsigned parallelism;
    // For datasets registered without a policy of their own.
    v1::FillPolicy default_policy = v1::FILL_ON_READ;
  };

  // How long after readers' last miss they count as reading still.
  static constexpr std::chrono::milliseconds kReadersQuietPeriod{200};
  // How long after readers last read a version they count as reading it
  // still: longer than a mount's use reports are apart (one a second), which
  // are all granaryd hears of reads the kernel serves from kept files.
  static constexpr std::chrono::milliseconds kReadersReadingPeriod{2500};

  // Everything must outlive the scheduler.
  FillScheduler(Catalog* catalog, ReadThrough* read_through, VersionActivity* activity,
                store::ChunkStore* store, ServerMetrics* metrics, ClusterView* cluster,
                Options options);
  // Cancels and joins running fills.
  ~FillScheduler();
  FillScheduler(const FillScheduler&) = delete;
  FillScheduler& operator=(const FillScheduler&) = delete;

  // A reader missed chunk `key` of `manifest`: starts the version's fill if
  // its policy says so and none ran yet, and has it fetch what follows `key`
  // next.
  void OnMiss(const std::shared_ptr<const Manifest>& manifest, const ChunkKey& key);

  // The fills of versions still registered, running or finished.
  std::vector<v1::FillProgress> Progress();

  // The policy that applies to `record`.
  v1::FillPolicy PolicyOf(const v1::CatalogDataset& record) const;

 private:
  // Whether `version` is still the current version of dataset `name`.
  bool Current(const std::string& name, uint64_t version) const;
  // Forgets the fills of versions no longer current (joining their jobs).
  void ReapLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  Catalog* const catalog_;
  ReadThrough* const read_through_;
  VersionActivity* const activity_;
  store::ChunkStore* const store_;
  ServerMetrics* const metrics_;
  ClusterView* const cluster_;
  const Options options_;
  Mutex mutex_;
  // By version; null for a version whose policy is not to fill.
  std::map<uint64_t, std::unique_ptr<PrewarmJob>> fills_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_PREWARM_FILL_SCHEDULER_H_
