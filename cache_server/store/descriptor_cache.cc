#include "cache_server/store/descriptor_cache.h"

#include <fcntl.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/base/status.h"

namespace granary::store {

DescriptorCache::DescriptorCache(size_t capacity) : capacity_(std::max<size_t>(capacity, 1)) {}

absl::StatusOr<SharedFd> DescriptorCache::Get(uint64_t id, const std::string& path, int flags) {
  {
    MutexLock lock(&mu_);
    if (auto it = open_.find(id); it != open_.end()) {
      recency_.splice(recency_.begin(), recency_, it->second.recency);
      return it->second.fd;
    }
  }
  auto fd = std::make_shared<const UniqueFd>(::open(path.c_str(), flags | O_CLOEXEC));
  if (!fd->valid()) return ErrnoStatus(errno, absl::StrCat("open data file ", path));
  MutexLock lock(&mu_);
  // Opened meanwhile by another caller: theirs is kept, this one closes.
  if (auto it = open_.find(id); it != open_.end()) return it->second.fd;
  InsertLocked(id, fd);
  return fd;
}

void DescriptorCache::Add(uint64_t id, SharedFd fd) {
  MutexLock lock(&mu_);
  InsertLocked(id, std::move(fd));
}

void DescriptorCache::InsertLocked(uint64_t id, SharedFd fd) {
  if (auto it = open_.find(id); it != open_.end()) {
    it->second.fd = std::move(fd);
    recency_.splice(recency_.begin(), recency_, it->second.recency);
  } else {
    recency_.push_front(id);
    open_.emplace(id, Entry{std::move(fd), recency_.begin()});
  }
  while (open_.size() > capacity_) {
    open_.erase(recency_.back());
    recency_.pop_back();
  }
}

void DescriptorCache::Forget(uint64_t id) {
  MutexLock lock(&mu_);
  auto it = open_.find(id);
  if (it == open_.end()) return;
  recency_.erase(it->second.recency);
  open_.erase(it);
}

size_t DescriptorCache::open_count() {
  MutexLock lock(&mu_);
  return open_.size();
}

}  // namespace granary::store
