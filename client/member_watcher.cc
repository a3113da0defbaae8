#include "client/member_watcher.h"

#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/base/logging.h"
#include "common/base/status.h"

namespace granary {

absl::StatusOr<MemberView> ViewFromMembers(const v1::GetMembersResponse& response) {
  std::vector<Member> members;
  members.reserve(response.members_size());
  std::string reader_group;
  for (const v1::MemberInfo& info : response.members()) {
    members.push_back({info.id(), info.address(), info.group(), info.weight(), info.up()});
    if (info.id() == response.self_id()) reader_group = info.group();
  }
  GRANARY_ASSIGN_OR_RETURN(std::shared_ptr<const ClusterMap> map,
                           ClusterMap::Build(std::move(members), reader_group));
  const Member* self = map->Find(response.self_id());
  if (self == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the member list does not name the answering server '", response.self_id(), "'"));
  }
  return MemberView{self->id, self->group, std::move(map)};
}

std::string MemberView::ToString() const {
  return absl::StrCat("cache group '", group, "' of ", members->members().size(),
                      " member(s); this node is '", self_id, "'");
}

MemberView LocalOnlyView(const std::string& address) {
  // One valid member cannot fail to build.
  std::shared_ptr<const ClusterMap> map =
      *ClusterMap::Build({Member{address, address}}, kDefaultGroup);
  return MemberView{address, kDefaultGroup, std::move(map)};
}

MemberWatcher::MemberWatcher(const DatasetClient* server, Options options, Listener listener)
    : server_(server), options_(options), listener_(std::move(listener)) {
  Refresh();
  last_refresh_ = std::chrono::steady_clock::now();
  thread_ = std::thread([this] { Run(); });
}

MemberWatcher::~MemberWatcher() {
  {
    MutexLock lock(&mutex_);
    stopping_ = true;
  }
  wake_.SignalAll();
  thread_.join();
}

void MemberWatcher::RefreshSoon() {
  {
    MutexLock lock(&mutex_);
    if (refresh_soon_) return;
    refresh_soon_ = true;
  }
  wake_.SignalAll();
}

void MemberWatcher::Run() {
  MutexLock lock(&mutex_);
  while (!stopping_) {
    auto due = last_refresh_ + (refresh_soon_ ? options_.min_refresh_interval : options_.interval);
    if (std::chrono::steady_clock::now() < due) {
      // Woken early to stop or to refresh sooner: the loop recomputes `due`.
      wake_.WaitUntil(&mutex_, due);
      continue;
    }
    refresh_soon_ = false;
    mutex_.Unlock();
    // Unlocked: a slow server must not block RefreshSoon() on a read path.
    Refresh();
    mutex_.Lock();
    last_refresh_ = std::chrono::steady_clock::now();
  }
}

void MemberWatcher::Refresh() {
  absl::StatusOr<v1::GetMembersResponse> response = server_->GetMembers();
  absl::StatusOr<MemberView> view =
      response.ok() ? ViewFromMembers(*response) : absl::StatusOr<MemberView>(response.status());
  if (!view.ok()) {
    if (!failing_) {
      GRANARY_LOG(WARNING) << "granaryd at " << server_->address()
                           << " cannot list the cluster's members (" << view.status() << "); "
                           << (answered_ ? "keeping the list it sent last"
                                         : "reading every chunk through it alone")
                           << " until it can";
      failing_ = true;
    }
    if (last_.members == nullptr) {
      last_ = LocalOnlyView(server_->address());
      listener_(last_);
    }
    return;
  }
  bool recovered = failing_;
  failing_ = false;
  answered_ = true;
  if (last_.members != nullptr && view->self_id == last_.self_id &&
      view->members->members() == last_.members->members()) {
    if (recovered) {
      GRANARY_LOG(INFO) << "granaryd at " << server_->address()
                        << " lists the cluster's members again";
    }
    return;
  }
  // The first view is the owner's to report (granary-fuse logs it with the
  // mount; `granary cat` keeps standard error quiet); changes are news.
  if (last_.members == nullptr) {
    GRANARY_LOG(DEBUG) << "chunks are read from their owners in " << view->ToString();
  } else {
    GRANARY_LOG(INFO) << "members changed: chunks are read from their owners in "
                      << view->ToString();
  }
  last_ = *std::move(view);
  listener_(last_);
}

}  // namespace granary
