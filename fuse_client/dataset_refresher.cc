#include "fuse_client/dataset_refresher.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "common/chunk_key.h"
#include "common/logging.h"
#include "common/status.h"

namespace granary::fuse {

absl::Status DatasetRefresher::Refresh() {
  MutexLock lock(&mutex_);
  return RefreshLocked();
}

void DatasetRefresher::MaybeRefresh() {
  if (!mutex_.TryLock()) return;
  absl::Status status = std::chrono::steady_clock::now() - last_attempt_ < min_interval_
                            ? absl::OkStatus()
                            : RefreshLocked();
  mutex_.Unlock();
  if (!status.ok()) {
    GRANARY_LOG_FIRST_N(WARNING, 20) << "cannot refresh the dataset list: " << status;
  }
}

absl::Status DatasetRefresher::RefreshLocked() {
  last_attempt_ = std::chrono::steady_clock::now();
  GRANARY_ASSIGN_OR_RETURN(std::vector<v1::DatasetInfo> infos, client_->ListDatasets());
  std::vector<std::shared_ptr<const MountedDataset>> shown;
  absl::Status first_error;
  bool found_only = false;
  for (const v1::DatasetInfo& info : infos) {
    if (!only_.empty() && info.name() != only_) continue;
    found_only = true;
    std::shared_ptr<const MountedDataset> dataset =
        table_->FindVersion(info.name(), info.version());
    if (dataset == nullptr) {
      absl::StatusOr<DatasetSnapshot> snapshot = client_->GetManifest(info.name(), info.version());
      if (!snapshot.ok()) {
        if (info.name() == only_) first_error = snapshot.status();
        if (unloadable_.emplace(info.name(), info.version()).second) {
          GRANARY_LOG(ERROR) << "cannot mount dataset '" << info.name() << "' version "
                             << FormatVersion(info.version())
                             << ", skipping it: " << snapshot.status();
        }
        // Keep showing the version mounted before, if any.
        dataset = table_->FindDataset(info.name());
        if (dataset == nullptr) continue;
      } else {
        dataset = table_->Add(*std::move(snapshot));
        GRANARY_LOG(INFO) << "mounted dataset '" << info.name() << "' version "
                          << FormatVersion(info.version()) << " ("
                          << dataset->snapshot().manifest.entries().size() << " entries)";
      }
    }
    shown.push_back(std::move(dataset));
  }
  table_->Publish(std::move(shown));
  if (!only_.empty() && !found_only) {
    return absl::NotFoundError(
        absl::StrCat("server ", client_->address(), " has no dataset '", only_, "'"));
  }
  return first_error;
}

}  // namespace granary::fuse
