#include "cache_server/catalog/version_activity.h"

#include <algorithm>
#include <vector>

namespace granary {

VersionActivity::VersionActivity(store::ChunkStore* store, std::chrono::milliseconds idle_after)
    : store_(store), idle_after_(idle_after), sweeper_([this] { DemoteIdle(); }) {}

VersionActivity::~VersionActivity() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  stop_.SignalAll();
  sweeper_.join();
}

void VersionActivity::Touch(uint64_t version) {
  const Clock::time_point now = Clock::now();
  MutexLock lock(&mu_);
  Use& use = uses_[version];
  use.last_touch = now;
  if (!use.active) {
    use.active = true;
    // Under the lock, so that a concurrent demotion cannot overtake it.
    SetStateLocked(version, store::VersionState::kActive);
  }
}

void VersionActivity::Hold(uint64_t version) {
  MutexLock lock(&mu_);
  Use& use = uses_[version];
  use.active = true;
  if (use.holds++ == 0) SetStateLocked(version, store::VersionState::kHeld);
}

void VersionActivity::Release(uint64_t version) {
  MutexLock lock(&mu_);
  auto it = uses_.find(version);
  if (it == uses_.end() || it->second.holds == 0) return;
  if (--it->second.holds == 0) SetStateLocked(version, store::VersionState::kActive);
}

void VersionActivity::SetStateLocked(uint64_t version, store::VersionState state) {
  if (store_->GetVersionState(version) == store::VersionState::kPinned) return;
  store_->SetVersionState(version, state);
}

void VersionActivity::Keep(uint64_t version) {
  const Clock::time_point now = Clock::now();
  MutexLock lock(&mu_);
  uses_[version].last_keep = now;
}

bool VersionActivity::KeptWithin(uint64_t version, std::chrono::milliseconds window) {
  return Within(version, window, &Use::last_keep);
}

bool VersionActivity::TouchedWithin(uint64_t version, std::chrono::milliseconds window) {
  return Within(version, window, &Use::last_touch);
}

bool VersionActivity::Within(uint64_t version, std::chrono::milliseconds window,
                             Clock::time_point Use::*last) {
  MutexLock lock(&mu_);
  auto it = uses_.find(version);
  return it != uses_.end() && Clock::now() - it->second.*last < window;
}

void VersionActivity::Forget(uint64_t version) {
  MutexLock lock(&mu_);
  uses_.erase(version);
}

void VersionActivity::DemoteIdle() {
  auto period = std::max<std::chrono::milliseconds>(idle_after_ / 4, std::chrono::milliseconds(10));
  MutexLock lock(&mu_);
  while (!stop_.WaitFor(&mu_, period,
                        [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; })) {
    Clock::time_point now = Clock::now();
    for (auto& [version, use] : uses_) {
      if (use.active && use.holds == 0 && now - use.last_touch >= idle_after_) {
        use.active = false;
        SetStateLocked(version, store::VersionState::kInactive);
      }
    }
  }
}

}  // namespace granary
