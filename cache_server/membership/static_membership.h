// StaticMembership reads the cluster's members from a members file
// (cache_server/config/members_file.h) and reloads it when it changes, without a restart.
// A reloaded file that does not parse is logged and ignored: the previous
// member list stays in force, so a half-written or mistyped file never shrinks
// the cluster.
//
// Thread-safety: Start() reports the initial list before returning; a
// background thread then checks the file's identity (inode, size, mtime) every
// `poll_interval` and reports each valid change. The destructor stops it.
#ifndef GRANARY_CACHE_SERVER_MEMBERSHIP_STATIC_MEMBERSHIP_H_
#define GRANARY_CACHE_SERVER_MEMBERSHIP_STATIC_MEMBERSHIP_H_

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "cache_server/membership/membership_source.h"
#include "common/base/mutex.h"

namespace granary {

class StaticMembership : public MembershipSource {
 public:
  // Fails with the members file's error (NOT_FOUND, INVALID_ARGUMENT naming
  // the key) when the initial file cannot be used.
  static absl::StatusOr<std::unique_ptr<StaticMembership>> Start(
      std::string path, MembershipListener listener,
      std::chrono::milliseconds poll_interval = std::chrono::seconds(1));
  ~StaticMembership() override;

 private:
  struct FileIdentity {
    uint64_t inode = 0;
    int64_t size = -1;
    int64_t mtime_ns = 0;
    friend bool operator==(const FileIdentity&, const FileIdentity&) = default;
  };

  StaticMembership(std::string path, MembershipListener listener,
                   std::chrono::milliseconds poll_interval);
  FileIdentity Identify() const;
  void PollLoop();

  const std::string path_;
  const MembershipListener listener_;
  const std::chrono::milliseconds poll_interval_;
  FileIdentity loaded_;

  Mutex mutex_;
  CondVar wake_;
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  std::thread thread_;
};

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_MEMBERSHIP_STATIC_MEMBERSHIP_H_
