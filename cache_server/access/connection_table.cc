#include "cache_server/access/connection_table.h"

#include <sys/stat.h>

#include "absl/strings/str_cat.h"
#include "cache_server/access/connection_budget.h"

namespace granary {

std::string ConnectionTable::LimitKey(const Caller& caller) {
  if (caller.channel == Caller::Channel::kUnixSocket) {
    return absl::StrCat("uid ", caller.credentials.uid);
  }
  return HostOf(caller.address);
}

bool ConnectionTable::StillOpen(int fd, ino_t inode) {
  struct stat info {};
  return ::fstat(fd, &info) == 0 && S_ISSOCK(info.st_mode) && info.st_ino == inode;
}

void ConnectionTable::ForgetLocked(absl::flat_hash_map<int, Record>::iterator record) {
  auto counted = per_key_.find(LimitKey(record->second.caller));
  if (counted != per_key_.end() && --counted->second == 0) per_key_.erase(counted);
  records_.erase(record);
}

absl::Status ConnectionTable::CheckLimitsLocked(const Caller& caller) const {
  if (records_.size() >= limits_.max_connections) {
    return absl::ResourceExhaustedError(absl::StrCat("granaryd holds ", records_.size(),
                                                     " connections, its limit (max_connections)"));
  }
  auto counted = per_key_.find(LimitKey(caller));
  uint32_t held = counted == per_key_.end() ? 0 : counted->second;
  bool local = caller.channel == Caller::Channel::kUnixSocket;
  uint32_t limit = local ? limits_.max_per_local_user : limits_.max_per_remote_host;
  if (held >= limit) {
    return absl::ResourceExhaustedError(
        absl::StrCat(LimitKey(caller), " holds ", held, " connections, the limit ",
                     local ? "(max_connections_per_user)" : "(max_connections_per_host)"));
  }
  return absl::OkStatus();
}

absl::Status ConnectionTable::Admit(int fd, const Caller& caller) {
  struct stat info {};
  if (::fstat(fd, &info) != 0) return absl::InternalError("cannot stat an accepted connection");
  MutexLock lock(&mutex_);
  // A record under this number is of a connection gRPC has closed since.
  if (auto reused = records_.find(fd); reused != records_.end()) ForgetLocked(reused);
  absl::Status within = CheckLimitsLocked(caller);
  if (!within.ok()) {
    // The count may include connections gRPC closed since the last sweep.
    SweepLocked();
    within = CheckLimitsLocked(caller);
  }
  if (!within.ok()) {
    refused_.fetch_add(1, std::memory_order_relaxed);
    return within;
  }
  records_[fd] = Record{info.st_ino, caller};
  ++per_key_[LimitKey(caller)];
  return absl::OkStatus();
}

absl::StatusOr<Caller> ConnectionTable::Find(int fd) const {
  MutexLock lock(&mutex_);
  auto record = records_.find(fd);
  if (record == records_.end()) {
    return absl::NotFoundError(absl::StrCat("no connection is recorded on descriptor ", fd));
  }
  return record->second.caller;
}

void ConnectionTable::Sweep() {
  MutexLock lock(&mutex_);
  SweepLocked();
}

void ConnectionTable::SweepLocked() {
  for (auto it = records_.begin(); it != records_.end();) {
    auto next = std::next(it);
    if (!StillOpen(it->first, it->second.inode)) ForgetLocked(it);
    it = next;
  }
}

size_t ConnectionTable::open_connections() const {
  MutexLock lock(&mutex_);
  return records_.size();
}

}  // namespace granary
