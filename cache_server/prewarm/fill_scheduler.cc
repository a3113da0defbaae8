#include "cache_server/prewarm/fill_scheduler.h"

#include <numeric>

#include "common/base/logging.h"

namespace granary {

FillScheduler::FillScheduler(Catalog* catalog, ReadThrough* read_through, VersionActivity* activity,
                             store::ChunkStore* store, ServerMetrics* metrics, ClusterView* cluster,
                             Options options)
    : catalog_(catalog),
      read_through_(read_through),
      activity_(activity),
      store_(store),
      metrics_(metrics),
      cluster_(cluster),
      options_(options) {}

FillScheduler::~FillScheduler() {
  MutexLock lock(&mutex_);
  fills_.clear();
}

v1::FillPolicy FillScheduler::PolicyOf(const v1::CatalogDataset& record) const {
  return record.fill() == v1::FILL_DEFAULT ? options_.default_policy : record.fill();
}

bool FillScheduler::Current(const std::string& name, uint64_t version) const {
  absl::StatusOr<v1::CatalogDataset> record = catalog_->Get(name);
  return record.ok() && !record->removed() && record->versions_size() > 0 &&
         record->versions().rbegin()->version() == version;
}

void FillScheduler::ReapLocked() {
  for (auto it = fills_.begin(); it != fills_.end();) {
    const bool gone = it->second != nullptr ? !Current(it->second->dataset_name(), it->first)
                                            : !catalog_->HasVersion(it->first);
    it = gone ? fills_.erase(it) : std::next(it);
  }
}

void FillScheduler::OnMiss(const std::shared_ptr<const Manifest>& manifest, const ChunkKey& key) {
  MutexLock lock(&mutex_);
  auto it = fills_.find(key.dataset_version);
  if (it != fills_.end()) {
    if (it->second != nullptr) it->second->Prefer(key);
    return;
  }
  const std::string name = manifest->identity().name;
  absl::StatusOr<v1::CatalogDataset> record = catalog_->Get(name);
  if (!record.ok() || !Current(name, key.dataset_version) ||
      PolicyOf(*record) != v1::FILL_ON_READ) {
    fills_.emplace(key.dataset_version, nullptr);
    return;
  }
  ReapLocked();
  std::vector<uint64_t> files;
  for (uint64_t id = 0; id < manifest->entries().size(); ++id) {
    if (manifest->entries()[id].type == EntryType::kFile && !manifest->IsHardLinkAlias(id)) {
      files.push_back(id);
    }
  }
  const uint32_t replicas = std::max<uint32_t>(1, record->replicas());
  const std::string group = cluster_->self().group;
  ClusterView* cluster = cluster_;
  ReadThrough* read_through = read_through_;
  VersionActivity* activity = activity_;
  PrewarmJob::Hooks hooks{
      .filter = [cluster, group, replicas](
                    const ChunkKey& chunk) { return cluster->Owns(chunk, group, {}, replicas); },
      // The fill and the readers' own misses together keep at most
      // `parallelism` reads at the source, so that a reader's miss waits
      // behind no more fill reads than that.
      .yield =
          [read_through, parallelism = options_.parallelism](unsigned worker) {
            return worker + static_cast<unsigned>(read_through->ReadersWaiting()) >= parallelism;
          },
      // While readers miss, only the neighbours of their misses: the rest of
      // the dataset (another directory, a shard far from what they read)
      // would take the source's bandwidth from them; and while they read the
      // version from the cache, the fill's reads and writes would take the
      // disk and CPUs from them.
      .readers_active =
          [read_through, activity, version = key.dataset_version] {
            return read_through->ReadersMissedWithin(kReadersQuietPeriod) ||
                   activity->TouchedWithin(version, kReadersReadingPeriod);
          },
      .wanted = [this, name, version = key.dataset_version] { return Current(name, version); },
      .admit = {},
      .not_fetched = {},
  };
  GRANARY_LOG(INFO) << "filling dataset '" << name << "' (this node's share) behind its readers "
                    << "with " << options_.parallelism << " workers";
  auto job = std::make_unique<PrewarmJob>(manifest, std::move(files), options_.parallelism,
                                          read_through_, store_, &metrics_->fill, std::move(hooks));
  job->Prefer(key);
  fills_.emplace(key.dataset_version, std::move(job));
}

std::vector<v1::FillProgress> FillScheduler::Progress() {
  MutexLock lock(&mutex_);
  ReapLocked();
  std::vector<v1::FillProgress> fills;
  for (const auto& [version, job] : fills_) {
    if (job == nullptr) continue;
    v1::FillProgress& fill = fills.emplace_back();
    fill.set_name(job->dataset_name());
    fill.set_version(version);
    *fill.mutable_progress() = job->Progress();
  }
  return fills;
}

}  // namespace granary
