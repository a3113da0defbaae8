#include "cache_server/prewarm/prewarm_job.h"

#include <algorithm>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/base/printable.h"
#include "common/base/size.h"
#include "common/base/status.h"
#include "common/dataset/chunk_math.h"
#include "common/reports/fraction.h"

namespace granary {

absl::StatusOr<std::vector<uint64_t>> SelectFiles(const Manifest& manifest,
                                                  const std::vector<std::string>& paths) {
  const ManifestEntries& entries = manifest.entries();
  std::vector<bool> chosen(entries.size(), paths.empty());
  for (const std::string& path : paths) {
    GRANARY_ASSIGN_OR_RETURN(std::string clean, CleanDatasetPath(path));
    std::optional<uint64_t> id = manifest.Find(clean);
    if (!id.has_value()) {
      return absl::NotFoundError(absl::StrCat("dataset '", manifest.identity().name,
                                              "' has no path '", Printable(path), "'"));
    }
    chosen[*id] = true;
    if (entries[*id].type == EntryType::kDirectory) {
      // Entries are sorted by path, so a directory's descendants follow it.
      for (uint64_t i = *id + 1; i < entries.size(); ++i) {
        if (!IsBelow(entries[i].path, clean)) {
          // '/' sorts before most characters but not all ("a-b" < "a/b"):
          // keep looking past siblings that share the directory's name.
          if (entries[i].path.starts_with(clean)) continue;
          break;
        }
        chosen[i] = true;
      }
    }
  }
  // A hard link is fetched as the file it names, once.
  for (uint64_t i = 0; i < entries.size(); ++i) {
    if (chosen[i] && manifest.IsHardLinkAlias(i)) chosen[manifest.CanonicalFileId(i)] = true;
  }
  std::vector<uint64_t> files;
  for (uint64_t i = 0; i < entries.size(); ++i) {
    if (chosen[i] && entries[i].type == EntryType::kFile && !manifest.IsHardLinkAlias(i)) {
      files.push_back(i);
    }
  }
  return files;
}

namespace {

// How often a job asks whether it is still wanted.
constexpr std::chrono::milliseconds kWantedCheckInterval{100};
// How long a worker held back by `yield` waits before asking again.
constexpr std::chrono::milliseconds kYieldWait{2};
// How long a worker with nothing preferred to fetch while readers are active
// waits for a reader's miss before asking again whether they still are.
constexpr std::chrono::milliseconds kReadersActiveWait{50};

// The chunks of `file_ids` (sorted here) that pass `filter`, in order.
std::vector<ChunkWalk::PlannedChunk> PlanChunks(const Manifest& manifest,
                                                std::vector<uint64_t> file_ids,
                                                const PrewarmJob::ChunkFilter& filter) {
  std::sort(file_ids.begin(), file_ids.end());
  const uint32_t chunk_size = manifest.chunk_size();
  std::vector<ChunkWalk::PlannedChunk> chunks;
  for (uint64_t file_id : file_ids) {
    uint64_t size = manifest.entries()[file_id].size;
    for (uint64_t index = 0; index < ChunkCount(size, chunk_size); ++index) {
      if (filter && !filter(ChunkKey{manifest.version(), file_id, static_cast<uint32_t>(index)})) {
        continue;
      }
      chunks.push_back(
          {file_id, static_cast<uint32_t>(index), ChunkLength(size, chunk_size, index)});
    }
  }
  return chunks;
}

}  // namespace

PrewarmJob::PrewarmJob(std::shared_ptr<const Manifest> manifest, std::vector<uint64_t> file_ids,
                       unsigned parallelism, ReadThrough* read_through, store::ChunkStore* store,
                       PrewarmMetrics* metrics, Hooks hooks)
    : dataset_name_(manifest->identity().name),
      read_through_(read_through),
      store_(store),
      metrics_(metrics),
      hooks_(std::move(hooks)),
      started_(std::chrono::steady_clock::now()),
      walk_(PlanChunks(*manifest, std::move(file_ids), hooks_.filter), manifest->entries().size()) {
  for (size_t i = 0; i < walk_.size(); ++i) bytes_total_ += walk_.chunk(i).length;
  manifest_ = std::move(manifest);
  metrics_->running.fetch_add(1);
  metrics_->bytes_remaining.fetch_add(static_cast<int64_t>(bytes_total_));
  unsigned workers = std::max(1u, std::min<unsigned>(parallelism, walk_.size()));
  running_workers_ = workers;
  for (unsigned i = 0; i < workers; ++i) workers_.emplace_back([this, i] { Work(i); });
}

PrewarmJob::~PrewarmJob() {
  Cancel();
  for (std::thread& worker : workers_) worker.join();
}

void PrewarmJob::Cancel() { cancelled_.store(true); }

bool PrewarmJob::WaitFor(std::chrono::milliseconds timeout) {
  MutexLock lock(&mu_);
  return finished_.WaitFor(
      &mu_, timeout, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return running_workers_ == 0; });
}

void PrewarmJob::Prefer(const ChunkKey& key) {
  MutexLock lock(&mu_);
  if (manifest_ == nullptr) return;
  walk_.Prefer(*manifest_, key);
  preferred_.SignalAll();
}

void PrewarmJob::Work(unsigned worker) {
  std::shared_ptr<const Manifest> manifest;
  {
    MutexLock lock(&mu_);
    manifest = manifest_;
  }
  auto last_check = std::chrono::steady_clock::now();
  while (!cancelled_.load()) {
    if (hooks_.wanted && std::chrono::steady_clock::now() - last_check > kWantedCheckInterval) {
      last_check = std::chrono::steady_clock::now();
      if (!hooks_.wanted()) {
        Cancel();
        break;
      }
    }
    if (worker > 0 && hooks_.yield && hooks_.yield(worker)) {
      std::this_thread::sleep_for(kYieldWait);
      continue;
    }
    const bool readers_active = hooks_.readers_active && hooks_.readers_active();
    std::optional<size_t> next;
    {
      MutexLock lock(&mu_);
      next = walk_.Next(readers_active ? ChunkWalk::Order::kPreferredOnly : ChunkWalk::Order::kAny);
      if (!next.has_value() && readers_active && !walk_.Exhausted()) {
        preferred_.WaitFor(&mu_, kReadersActiveWait, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return cancelled_.load() || walk_.HasPreferred();
        });
        continue;
      }
    }
    if (!next.has_value()) break;
    const ChunkWalk::PlannedChunk& chunk = walk_.chunk(*next);
    ChunkKey key{manifest->version(), chunk.file_id, chunk.chunk_index};
    if (store_->Contains(key)) {
      chunks_already_cached_.fetch_add(1);
      metrics_->chunks_skipped.fetch_add(1);
    } else {
      if (!Admit(key, chunk.length)) break;
      absl::StatusOr<ReadThrough::ChunkData> fetched = read_through_->Fetch(*manifest, key);
      if (!fetched.ok()) {
        if (hooks_.not_fetched) hooks_.not_fetched(key);
        RecordFailure(*manifest, chunk.file_id, fetched.status());
        continue;
      }
      bytes_fetched_.fetch_add(chunk.length);
      metrics_->chunks_fetched.fetch_add(1);
      metrics_->bytes_fetched.fetch_add(chunk.length);
      if (!read_through_->Holds(key)) {
        if (hooks_.not_fetched) hooks_.not_fetched(key);
        Stop(NotKept(*manifest));
        break;
      }
    }
    bytes_done_.fetch_add(chunk.length);
    chunks_done_.fetch_add(1);
    metrics_->bytes_remaining.fetch_sub(chunk.length);
  }
  // Before the job counts as finished, so that a finished job holds no
  // manifest.
  manifest.reset();
  MutexLock lock(&mu_);
  if (--running_workers_ == 0) {
    manifest_.reset();
    // What a cancelled job did not do is no longer remaining.
    metrics_->bytes_remaining.fetch_sub(static_cast<int64_t>(bytes_total_ - bytes_done_.load()));
    metrics_->running.fetch_sub(1);
    finished_.SignalAll();
  }
}

bool PrewarmJob::Admit(const ChunkKey& key, uint64_t length) {
  if (!hooks_.admit) return true;
  absl::Status admitted = hooks_.admit(key, length);
  if (admitted.ok()) return true;
  Stop(std::move(admitted));
  return false;
}

void PrewarmJob::Stop(absl::Status why) {
  Cancel();
  MutexLock lock(&mu_);
  if (stopped_.ok()) stopped_ = std::move(why);
}

absl::Status PrewarmJob::NotKept(const Manifest& manifest) const {
  const store::StoreStats stats = store_->Stats();
  const uint64_t held = store_->CachedBytes(manifest.version());
  return absl::ResourceExhaustedError(absl::StrCat(
      "the cache did not keep what it fetched of '", Printable(manifest.identity().name),
      "': this node holds ", FormatSize(held), " (",
      absl::StrFormat("%.1f%%", 100.0 * Fraction(held, manifest.total_bytes())), ") of its ",
      FormatSize(manifest.total_bytes()), " (capacity ", FormatSize(stats.capacity_bytes), ", ",
      FormatSize(stats.disk_bytes), " in use, by data it keeps for datasets in use)"));
}

absl::Status PrewarmJob::Stopped() const {
  MutexLock lock(&mu_);
  return stopped_;
}

void PrewarmJob::RecordFailure(const Manifest& manifest, uint64_t file_id,
                               const absl::Status& status) {
  MutexLock lock(&mu_);
  if (!walk_.MarkFailed(file_id)) return;
  v1::FileFailure* failure = &failures_.emplace_back();
  failure->set_path(manifest.entries()[file_id].path);
  failure->set_error(std::string(status.message()));
}

v1::PrewarmProgress PrewarmJob::Progress() const {
  v1::PrewarmProgress progress;
  MutexLock lock(&mu_);
  progress.set_finished(running_workers_ == 0);
  progress.set_bytes_done(bytes_done_.load());
  progress.set_bytes_total(bytes_total_);
  progress.set_chunks_done(chunks_done_.load());
  progress.set_chunks_total(walk_.size());
  progress.set_chunks_already_cached(chunks_already_cached_.load());
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  double rate = seconds > 0 ? static_cast<double>(bytes_fetched_.load()) / seconds : 0;
  progress.set_bytes_per_second(rate);
  uint64_t remaining = bytes_total_ - progress.bytes_done();
  progress.set_eta_seconds(remaining == 0 ? 0
                           : rate > 0     ? static_cast<double>(remaining) / rate
                                          : -1);
  for (const v1::FileFailure& failure : failures_) *progress.add_failures() = failure;
  return progress;
}

}  // namespace granary
