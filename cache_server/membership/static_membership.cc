#include "cache_server/membership/static_membership.h"

#include <sys/stat.h>

#include "cache_server/config/members_file.h"
#include "common/base/logging.h"

namespace granary {

absl::StatusOr<std::unique_ptr<StaticMembership>> StaticMembership::Start(
    std::string path, MembershipListener listener, std::chrono::milliseconds poll_interval) {
  std::unique_ptr<StaticMembership> membership(
      new StaticMembership(std::move(path), std::move(listener), poll_interval));
  membership->loaded_ = membership->Identify();
  auto members = ReadMembersFile(membership->path_);
  if (!members.ok()) return members.status();
  membership->listener_(*std::move(members));
  membership->thread_ = std::thread([m = membership.get()] { m->PollLoop(); });
  return membership;
}

StaticMembership::StaticMembership(std::string path, MembershipListener listener,
                                   std::chrono::milliseconds poll_interval)
    : path_(std::move(path)), listener_(std::move(listener)), poll_interval_(poll_interval) {}

StaticMembership::~StaticMembership() {
  {
    MutexLock lock(&mutex_);
    stopping_ = true;
  }
  wake_.SignalAll();
  if (thread_.joinable()) thread_.join();
}

StaticMembership::FileIdentity StaticMembership::Identify() const {
  struct stat info;
  if (::stat(path_.c_str(), &info) != 0) return FileIdentity{};
  return FileIdentity{
      static_cast<uint64_t>(info.st_ino), static_cast<int64_t>(info.st_size),
      static_cast<int64_t>(info.st_mtim.tv_sec) * 1'000'000'000 + info.st_mtim.tv_nsec};
}

void StaticMembership::PollLoop() {
  while (true) {
    {
      MutexLock lock(&mutex_);
      if (wake_.WaitFor(&mutex_, poll_interval_,
                        [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) { return stopping_; })) {
        return;
      }
    }
    FileIdentity current = Identify();
    if (current == loaded_) continue;
    loaded_ = current;
    auto members = ReadMembersFile(path_);
    if (!members.ok()) {
      GRANARY_LOG(ERROR) << "keeping the previous members: " << members.status();
      continue;
    }
    GRANARY_LOG(INFO) << "members file " << path_ << " reloaded: " << members->size() << " members";
    listener_(*std::move(members));
  }
}

}  // namespace granary
