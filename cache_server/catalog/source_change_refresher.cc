#include "cache_server/catalog/source_change_refresher.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/logging.h"
#include "common/base/printable.h"
#include "common/dataset/chunk_key.h"

namespace granary {

SourceChangeRefresher::SourceChangeRefresher(DatasetRegistry* registry, const Catalog* catalog,
                                             std::chrono::milliseconds min_interval,
                                             OnRefreshed on_refreshed)
    : registry_(registry),
      catalog_(catalog),
      min_interval_(min_interval),
      on_refreshed_(std::move(on_refreshed)),
      thread_([this] { Run(); }) {}

SourceChangeRefresher::~SourceChangeRefresher() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  wake_.SignalAll();
  thread_.join();
}

void SourceChangeRefresher::Notice(const Manifest& version, std::string_view path) {
  const std::string& name = version.identity().name;
  {
    MutexLock lock(&mu_);
    // One notice per version waits; a newer version's replaces an older
    // one's, which its refresh would drop.
    auto it = noticed_.find(name);
    if (it != noticed_.end() && it->second.version == version.version()) return;
    noticed_.insert_or_assign(name, Noticed{version.version(), std::string(path)});
  }
  wake_.Signal();
}

void SourceChangeRefresher::Run() {
  while (std::optional<std::pair<std::string, Noticed>> due = NextDue()) {
    Refresh(due->first, due->second);
    MutexLock lock(&mu_);
    const Clock::time_point now = Clock::now();
    refreshed_at_[due->first] = now;
    // A dataset refreshed a whole interval ago needs its turn kept no longer.
    for (auto it = refreshed_at_.begin(); it != refreshed_at_.end();) {
      auto here = it++;
      if (now - here->second >= min_interval_) refreshed_at_.erase(here);
    }
  }
}

std::optional<std::pair<std::string, SourceChangeRefresher::Noticed>>
SourceChangeRefresher::NextDue() {
  MutexLock lock(&mu_);
  while (!stopping_) {
    Clock::time_point next = Clock::time_point::max();
    const Clock::time_point now = Clock::now();
    for (auto it = noticed_.begin(); it != noticed_.end(); ++it) {
      auto last = refreshed_at_.find(it->first);
      const Clock::time_point turn =
          last == refreshed_at_.end() ? now : last->second + min_interval_;
      if (turn <= now) {
        std::pair<std::string, Noticed> due(it->first, std::move(it->second));
        noticed_.erase(it);
        return due;
      }
      next = std::min(next, turn);
    }
    if (next == Clock::time_point::max()) {
      wake_.Wait(&mu_);
    } else {
      wake_.WaitUntil(&mu_, next);
    }
  }
  return std::nullopt;
}

void SourceChangeRefresher::Refresh(const std::string& name, const Noticed& noticed) {
  absl::StatusOr<uint64_t> current = catalog_->CurrentVersionOf(name);
  if (!current.ok() || *current != noticed.version) return;
  const std::string change =
      absl::StrCat("RefreshDataset '", Printable(name), "' (source file '", Printable(noticed.path),
                   "' of version ", FormatVersion(noticed.version),
                   " changed its owner, mode, links or attributes)");
  absl::StatusOr<v1::DatasetInfo> info = registry_->Refresh(name);
  if (!info.ok()) {
    GRANARY_LOG(WARNING) << "audit: granaryd, on a change in the source: " << change << ": "
                         << info.status();
    return;
  }
  if (info->version() == noticed.version) {
    GRANARY_LOG(INFO) << "audit: granaryd, on a change in the source: " << change
                      << ": OK, the scan found nothing new";
    return;
  }
  GRANARY_LOG(INFO) << "audit: granaryd, on a change in the source: " << change
                    << ": OK, to version " << FormatVersion(info->version());
  on_refreshed_();
}

}  // namespace granary
