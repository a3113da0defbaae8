// DataDirLock makes a granaryd the only one using its data directory: it holds
// an exclusive flock(2) on <data-dir>/granaryd.lock for its lifetime. The lock
// file records the holder's pid, so a refusal can name it. The kernel drops the
// lock when the process dies, even by SIGKILL, so no stale lock survives.
//
// Thread-safety: not thread-safe; one owner.
#ifndef GRANARY_CACHE_SERVER_DATA_DIR_LOCK_H_
#define GRANARY_CACHE_SERVER_DATA_DIR_LOCK_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace granary {

class DataDirLock {
 public:
  // Creates `data_dir` if missing and locks it. FAILED_PRECONDITION naming the
  // directory and the other granaryd's pid when another process holds it.
  static absl::StatusOr<std::unique_ptr<DataDirLock>> Acquire(const std::string& data_dir);
  ~DataDirLock();
  DataDirLock(const DataDirLock&) = delete;
  DataDirLock& operator=(const DataDirLock&) = delete;

 private:
  explicit DataDirLock(int fd) : fd_(fd) {}
  int fd_;
};

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_DATA_DIR_LOCK_H_
