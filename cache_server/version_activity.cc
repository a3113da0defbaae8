#include "cache_server/version_activity.h"

#include <algorithm>
#include <vector>

namespace granary {

VersionActivity::VersionActivity(store::ChunkStore* store, std::chrono::milliseconds idle_after)
    : store_(store), idle_after_(idle_after), sweeper_([this] { DemoteIdle(); }) {}

VersionActivity::~VersionActivity() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  sweeper_.join();
}

void VersionActivity::Touch(uint64_t version) {
  std::lock_guard lock(mu_);
  auto [it, inserted] = last_use_.try_emplace(version, Clock::now());
  if (inserted) {
    // Under the lock, so that a concurrent demotion cannot overtake it.
    store_->SetVersionState(version, store::VersionState::kActive);
  } else {
    it->second = Clock::now();
  }
}

void VersionActivity::Forget(uint64_t version) {
  std::lock_guard lock(mu_);
  last_use_.erase(version);
}

void VersionActivity::DemoteIdle() {
  auto period = std::max<std::chrono::milliseconds>(idle_after_ / 4, std::chrono::milliseconds(10));
  std::unique_lock lock(mu_);
  while (!stop_cv_.wait_for(lock, period, [this] { return stopping_; })) {
    Clock::time_point now = Clock::now();
    std::vector<uint64_t> idle;
    for (const auto& [version, last_use] : last_use_) {
      if (now - last_use >= idle_after_) idle.push_back(version);
    }
    for (uint64_t version : idle) {
      last_use_.erase(version);
      store_->SetVersionState(version, store::VersionState::kInactive);
    }
  }
}

}  // namespace granary
