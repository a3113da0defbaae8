#include "cache_server/version_releaser.h"

#include <malloc.h>

namespace granary {
namespace {

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

VersionReleaser::VersionReleaser(DatasetRegistry* registry, VersionActivity* activity,
                                 std::chrono::milliseconds grace, std::chrono::milliseconds period)
    : registry_(registry), activity_(activity), grace_(grace), period_(period), thread_([this] {
        Run();
      }) {}

VersionReleaser::~VersionReleaser() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void VersionReleaser::Run() {
  std::unique_lock lock(mutex_);
  if (wake_.wait_for(lock, grace_, [this] { return stopping_; })) return;
  while (!wake_.wait_for(lock, period_, [this] { return stopping_; })) {
    lock.unlock();
    size_t released = registry_->ReleaseRetired(NowUnixMs(), grace_, [this](uint64_t version) {
      return activity_->UsedWithin(version, grace_);
    });
    // A manifest is many small allocations: without this, freeing them
    // leaves the process holding their pages.
    if (released > 0) malloc_trim(0);
    lock.lock();
  }
}

}  // namespace granary
