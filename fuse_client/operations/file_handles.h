// FileHandles<T> turns the state of an open file or directory (a T that
// granary-fuse owns) into the 64-bit handle the kernel quotes back in every
// request on it, and back, across takeovers of the mount: a handle is the
// object's address tagged with the generation of the server that issued it
// (x86-64 and arm64 user addresses fit in 48 bits). A handle of this
// generation is the object itself, found with no lock; one issued by an
// earlier server of the mount, whose objects died with it, is adopted: the
// object `adopt` rebuilds from the request's inode stands for it, once per
// handle, until the kernel releases it.
//
// Generations are 16 bits: a handle kept open across 65,535 takeovers would
// be taken for one of the current server.
//
// Thread-safety: every method may be called concurrently.
#ifndef GRANARY_FUSE_CLIENT_OPERATIONS_FILE_HANDLES_H_
#define GRANARY_FUSE_CLIENT_OPERATIONS_FILE_HANDLES_H_

#include <cstdint>
#include <functional>
#include <memory>

#include "absl/container/flat_hash_map.h"
#include "common/base/mutex.h"

namespace granary::fuse {

template <typename T>
class FileHandles {
 public:
  explicit FileHandles(uint16_t generation) : generation_(generation) {}

  // The handle that owns `object` until Release().
  uint64_t Issue(std::unique_ptr<T> object) {
    return uint64_t{generation_} << kAddressBits | reinterpret_cast<uint64_t>(object.release());
  }

  // The object behind `handle`, adopting one for a handle of an earlier
  // server; nullptr if `adopt` returns none (its version is gone).
  T* Find(uint64_t handle, const std::function<std::unique_ptr<T>()>& adopt) {
    if (IssuedHere(handle)) return reinterpret_cast<T*>(handle & kAddressMask);
    MutexLock lock(&mutex_);
    auto it = adopted_.find(handle);
    if (it != adopted_.end()) return it->second.get();
    std::unique_ptr<T> object = adopt();
    T* found = object.get();
    if (found != nullptr) adopted_.emplace(handle, std::move(object));
    return found;
  }

  // Whether this process issued `handle`.
  bool IssuedHere(uint64_t handle) const { return handle >> kAddressBits == generation_; }

  // Gives `handle`'s object back; null for a handle of an earlier server
  // never adopted.
  std::unique_ptr<T> Release(uint64_t handle) {
    if (IssuedHere(handle)) return std::unique_ptr<T>(reinterpret_cast<T*>(handle & kAddressMask));
    MutexLock lock(&mutex_);
    auto it = adopted_.find(handle);
    if (it == adopted_.end()) return nullptr;
    std::unique_ptr<T> object = std::move(it->second);
    adopted_.erase(it);
    return object;
  }

 private:
  static constexpr int kAddressBits = 48;
  static constexpr uint64_t kAddressMask = (uint64_t{1} << kAddressBits) - 1;

  const uint16_t generation_;
  Mutex mutex_;
  absl::flat_hash_map<uint64_t, std::unique_ptr<T>> adopted_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace granary::fuse

#endif  // GRANARY_FUSE_CLIENT_OPERATIONS_FILE_HANDLES_H_
