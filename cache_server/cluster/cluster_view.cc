#include "cache_server/cluster/cluster_view.h"

#include <algorithm>

#include "common/base/logging.h"
#include "common/base/status.h"

namespace granary {

ClusterView::ClusterView(Member self, MemberClients::Options client_options)
    : self_(std::move(self)), clients_(std::move(client_options)) {
  current_ = *ClusterMap::Build({self_}, self_.group);
  previous_ = current_;
}

absl::Status ClusterView::Update(std::vector<Member> members) {
  auto listed = std::find_if(members.begin(), members.end(),
                             [&](const Member& member) { return member.id == self_.id; });
  if (listed == members.end()) {
    members.push_back(self_);
  } else {
    listed->up = true;
  }
  GRANARY_ASSIGN_OR_RETURN(std::shared_ptr<const ClusterMap> map,
                           ClusterMap::Build(std::move(members), self_.group));
  std::vector<std::function<void()>> listeners;
  {
    MutexLock lock(&mutex_);
    if (map->members() == current_->members()) return absl::OkStatus();
    previous_ = std::move(current_);
    current_ = std::move(map);
    listeners = listeners_;
  }
  std::shared_ptr<const ClusterMap> now = current();
  size_t up = 0;
  for (const Member& member : now->members()) up += member.up ? 1 : 0;
  GRANARY_LOG(INFO) << "cluster changed: " << now->members().size() << " members, " << up
                    << " up, in " << now->groups().size() << " groups";
  for (const auto& listener : listeners) listener();
  return absl::OkStatus();
}

void ClusterView::OnChange(std::function<void()> listener) {
  MutexLock lock(&mutex_);
  listeners_.push_back(std::move(listener));
}

std::shared_ptr<const ClusterMap> ClusterView::current() const {
  MutexLock lock(&mutex_);
  return current_;
}

std::shared_ptr<const ClusterMap> ClusterView::previous() const {
  MutexLock lock(&mutex_);
  return previous_;
}

std::vector<Member> ClusterView::Peers() const {
  std::vector<Member> peers;
  std::shared_ptr<const ClusterMap> map = current();
  for (const Member& member : map->members()) {
    if (member.up && member.id != self_.id) peers.push_back(member);
  }
  return peers;
}

std::vector<Member> ClusterView::GroupMembers(std::string_view group) const {
  std::vector<Member> members;
  std::shared_ptr<const ClusterMap> map = current();
  for (const Member& member : map->members()) {
    if (member.up && member.group == group) members.push_back(member);
  }
  return members;
}

bool ClusterView::Owns(const ChunkKey& key, std::string_view group,
                       const std::vector<std::string>& unreachable, uint32_t replicas) const {
  std::shared_ptr<const ClusterMap> map = current();
  uint32_t reachable_owners = 0;
  for (const Member* owner : map->Owners(key, group, unreachable.size() + replicas)) {
    if (std::find(unreachable.begin(), unreachable.end(), owner->id) != unreachable.end()) {
      continue;
    }
    if (owner->id == self_.id) return true;
    if (++reachable_owners == replicas) return false;
  }
  return false;
}

std::optional<Member> ClusterView::OwnerElsewhere(const ChunkKey& key) {
  std::shared_ptr<const ClusterMap> map = current();
  std::vector<const Member*> owners = map->Owners(key, self_.group, 1);
  if (owners.empty() || owners.front()->id == self_.id) return std::nullopt;
  if (clients_.IsSuspect(owners.front()->id)) return std::nullopt;
  return *owners.front();
}

std::vector<Member> ClusterView::CopySources(const ChunkKey& key) {
  std::shared_ptr<const ClusterMap> map = current();
  std::shared_ptr<const ClusterMap> before = previous();
  std::vector<Member> sources;
  auto add = [&](const Member* member) {
    if (member == nullptr || member->id == self_.id) return;
    const Member* live = map->Find(member->id);
    if (live == nullptr || !live->up) return;
    for (const Member& known : sources) {
      if (known.id == live->id) return;
    }
    sources.push_back(*live);
  };
  // The owner the chunk would have without this node: where it lived before
  // this node joined (or came back empty), or its owner if that is not us.
  for (const Member* owner : map->Owners(key, self_.group, 2)) {
    if (owner->id == self_.id) continue;
    add(owner);
    break;
  }
  if (before != map) {
    std::vector<const Member*> owners = before->Owners(key, self_.group, 1);
    if (!owners.empty()) add(owners.front());
  }
  for (const std::string& group : map->groups()) {
    if (group == self_.group) continue;
    std::vector<const Member*> owners = map->Owners(key, group, 1);
    if (!owners.empty()) add(owners.front());
  }
  // A copy only spares the source a read: not worth a suspect's deadline.
  std::erase_if(sources, [this](const Member& member) { return clients_.IsSuspect(member.id); });
  return sources;
}

}  // namespace granary
