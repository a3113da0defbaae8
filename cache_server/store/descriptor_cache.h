// DescriptorCache bounds how many data files the store keeps open. A cache
// holds one data file per source file, so a dataset of a million files would
// otherwise need a million descriptors, and granaryd would run out of them
// for its sockets and source files long before that (Linux allows 1,024 to
// a few tens of thousands per process by default).
//
// Get() returns the data file's descriptor, opening it on a miss and closing
// the least recently used one beyond the capacity. A descriptor is shared:
// closing it in the cache only drops the cache's reference, so one in use
// stays open until its last holder lets go. Descriptors in use may thus
// exceed the capacity by the number of I/Os in flight.
//
// Thread-safety: all methods may be called concurrently. open(2) runs outside
// the cache's lock.
#ifndef GRANARY_CACHE_SERVER_STORE_DESCRIPTOR_CACHE_H_
#define GRANARY_CACHE_SERVER_STORE_DESCRIPTOR_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "common/base/mutex.h"
#include "common/base/unique_fd.h"

namespace granary::store {

using SharedFd = std::shared_ptr<const UniqueFd>;

class DescriptorCache {
 public:
  // Keeps at most `capacity` (at least 1) descriptors open when idle.
  explicit DescriptorCache(size_t capacity);
  DescriptorCache(const DescriptorCache&) = delete;
  DescriptorCache& operator=(const DescriptorCache&) = delete;

  // The descriptor of data file `id`, opened at `path` with `flags` (O_CLOEXEC
  // is added) on a miss; the errno status of open(2), naming `path`, if that
  // fails. All calls for one id must pass the same path and flags.
  absl::StatusOr<SharedFd> Get(uint64_t id, const std::string& path, int flags);
  // Puts the descriptor of a file just created into the cache.
  void Add(uint64_t id, SharedFd fd);
  // Closes the cache's descriptor of `id`, if any (the file is gone).
  void Forget(uint64_t id);

  size_t capacity() const { return capacity_; }
  size_t open_count();

 private:
  struct Entry {
    SharedFd fd;
    std::list<uint64_t>::iterator recency;
  };
  // Inserts (or refreshes) `id` as the most recently used, then closes the
  // least recently used beyond the capacity.
  void InsertLocked(uint64_t id, SharedFd fd) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const size_t capacity_;
  Mutex mu_;
  absl::flat_hash_map<uint64_t, Entry> open_ ABSL_GUARDED_BY(mu_);
  std::list<uint64_t> recency_ ABSL_GUARDED_BY(mu_);  // Most recently used first.
};

}  // namespace granary::store

#endif  // GRANARY_CACHE_SERVER_STORE_DESCRIPTOR_CACHE_H_
