#include "scheduler_hooks/locate_cache.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "common/base/mutex.h"

namespace granary::hooks {
namespace {

using Clock = std::chrono::steady_clock;

class LocateCache {
 public:
  LocateCache(Locator inner, std::chrono::milliseconds ttl, size_t max_entries)
      : inner_(std::move(inner)), ttl_(ttl), max_entries_(max_entries) {}

  absl::StatusOr<v1::LocateResponse> Locate(const std::string& dataset) {
    {
      MutexLock lock(&mutex_);
      auto entry = entries_.find(dataset);
      if (entry != entries_.end() && Clock::now() < entry->second.expires) {
        return entry->second.answer;
      }
    }
    absl::StatusOr<v1::LocateResponse> answer = inner_(dataset);
    if (answer.ok() || absl::IsNotFound(answer.status())) {
      MutexLock lock(&mutex_);
      const Clock::time_point now = Clock::now();
      if (entries_.size() >= max_entries_ && !entries_.contains(dataset)) {
        absl::erase_if(entries_, [now](const auto& entry) { return entry.second.expires <= now; });
        if (entries_.size() >= max_entries_) entries_.clear();
      }
      entries_.insert_or_assign(dataset, Entry{now + ttl_, answer});
    }
    return answer;
  }

 private:
  struct Entry {
    Clock::time_point expires;
    absl::StatusOr<v1::LocateResponse> answer;
  };

  const Locator inner_;
  const std::chrono::milliseconds ttl_;
  const size_t max_entries_;
  Mutex mutex_;
  absl::flat_hash_map<std::string, Entry> entries_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace

Locator CachingLocator(Locator inner, std::chrono::milliseconds ttl, size_t max_entries) {
  if (ttl.count() <= 0 || max_entries == 0) return inner;
  auto cache = std::make_shared<LocateCache>(std::move(inner), ttl, max_entries);
  return [cache](const std::string& dataset) { return cache->Locate(dataset); };
}

}  // namespace granary::hooks
