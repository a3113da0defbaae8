#include "fuse_client/read_path/use_reporter.h"

#include "common/base/logging.h"

namespace granary::fuse {
namespace {

// Files per report message: about 25 bytes each, inside one local read
// message (kMaxLocalReadMessageBytes) with room for the kept versions (8
// bytes each: a mount keeps at most granaryd's max_datasets, 1,000 by
// default, and the few retired versions still open).
constexpr int kFilesPerMessage = 1500;

}  // namespace

UseReporter::UseReporter(LocalChunkReader* local, std::chrono::milliseconds interval,
                         OnWithdrawn on_withdrawn, KeptVersions kept_versions)
    : local_(local),
      interval_(interval),
      on_withdrawn_(std::move(on_withdrawn)),
      kept_versions_(std::move(kept_versions)) {}

UseReporter::~UseReporter() {
  if (reporting_ == nullptr) return;
  reporting_.reset();
  SendPending();
}

void UseReporter::Start() {
  SendPending();
  reporting_ = std::make_unique<PeriodicThread>(interval_, interval_, [this] { SendPending(); });
}

void UseReporter::Record(uint64_t dataset_version, uint64_t file_id, uint64_t bytes,
                         uint64_t chunks) {
  MutexLock lock(&mutex_);
  Use& use = pending_[{dataset_version, file_id}];
  use.bytes += bytes;
  use.chunks += chunks;
}

uint64_t UseReporter::reports() const {
  MutexLock lock(&mutex_);
  return reports_;
}

bool UseReporter::Send(const absl::flat_hash_map<FileKey, Use>& uses,
                       const std::vector<uint64_t>& kept) {
  auto it = uses.begin();
  bool first = true;
  do {
    v1::UseReport report;
    report.set_withdrawn_after(withdrawn_through_);
    if (first) report.mutable_kept_versions()->Add(kept.begin(), kept.end());
    first = false;
    for (int listed = 0; it != uses.end() && listed < kFilesPerMessage; ++it, ++listed) {
      v1::FileUse* use = report.add_files();
      use->set_dataset_version(it->first.first);
      use->set_file_id(it->first.second);
      use->set_bytes(it->second.bytes);
      use->set_chunks(it->second.chunks);
    }
    absl::StatusOr<v1::WithdrawnFiles> withdrawn = local_->ReportUses(report);
    if (!withdrawn.ok()) {
      GRANARY_LOG_FIRST_N(WARNING, 10) << "cannot report reads to granaryd: " << withdrawn.status();
      // The next answer then cannot list what was withdrawn meanwhile.
      withdrawn_through_ = 0;
      return false;
    }
    withdrawn_through_ = withdrawn->withdrawn_through();
    on_withdrawn_(*withdrawn);
    MutexLock lock(&mutex_);
    reports_++;
  } while (it != uses.end());
  return true;
}

void UseReporter::SendPending() {
  absl::flat_hash_map<FileKey, Use> uses;
  {
    MutexLock lock(&mutex_);
    uses.swap(pending_);
  }
  if (!Send(uses, kept_versions_())) {
    // What could not be reported is dropped: hits undercounted for one
    // interval, and those files' last use a little older.
    on_withdrawn_(v1::WithdrawnFiles());
  }
}

}  // namespace granary::fuse
