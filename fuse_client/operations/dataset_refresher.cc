#include "fuse_client/operations/dataset_refresher.h"

#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/base/logging.h"
#include "common/base/status.h"
#include "common/dataset/chunk_key.h"

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
  std::vector<uint32_t> shown;
  absl::Status first_error;
  bool found_only = false;
  for (const v1::DatasetInfo& info : infos) {
    if (!only_.empty() && info.name() != only_) continue;
    found_only = true;
    std::optional<DatasetSnapshot> snapshot;
    // The new version of a dataset being read (or the one dataset mounted)
    // is loaded now, so that one whose manifest cannot be fetched never
    // replaces one that works; the others load when first used.
    if (!table_->HasVersion(info.name(), info.version()) &&
        (info.name() == only_ || table_->IsLoaded(info.name()))) {
      absl::StatusOr<DatasetSnapshot> fetched = client_->GetManifest(info.name(), info.version());
      if (!fetched.ok()) {
        if (info.name() == only_) first_error = fetched.status();
        if (unloadable_.emplace(info.name(), info.version()).second) {
          GRANARY_LOG(ERROR) << "cannot mount dataset '" << info.name() << "' version "
                             << FormatVersion(info.version())
                             << ", skipping it: " << fetched.status();
        }
        if (std::optional<uint32_t> before = table_->ShownSlot(info.name())) {
          shown.push_back(*before);
        }
        continue;
      }
      snapshot = *std::move(fetched);
    }
    shown.push_back(table_->Show(info, std::move(snapshot)));
  }
  table_->Publish(shown);
  if (!only_.empty() && !found_only) {
    return absl::NotFoundError(
        absl::StrCat("server ", client_->address(), " has no dataset '", only_, "'"));
  }
  return first_error;
}

}  // namespace granary::fuse
