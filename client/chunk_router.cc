#include "client/chunk_router.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/base/absl_compat.h"
#include "common/base/logging.h"
#include "common/base/status.h"

namespace granary {

ChunkRouter::ChunkRouter(Options options, std::shared_ptr<const ClusterMap> members)
    : options_(std::move(options)),
      clients_({options_.local_node_id, options_.local_address, options_.suspect_period,
                options_.client}),
      members_(std::move(members)) {}

void ChunkRouter::UpdateMembers(std::shared_ptr<const ClusterMap> members) {
  MutexLock lock(&mutex_);
  members_ = std::move(members);
}

std::shared_ptr<const ClusterMap> ChunkRouter::members() const {
  MutexLock lock(&mutex_);
  return members_;
}

std::vector<const Member*> ChunkRouter::OrderedOwners(const ClusterMap& members,
                                                      const ChunkKey& key) {
  std::vector<const Member*> owners = members.Owners(key, options_.group, options_.attempts);
  std::stable_partition(owners.begin(), owners.end(),
                        [this](const Member* owner) { return !clients_.IsSuspect(owner->id); });
  return owners;
}

std::vector<std::string> ChunkRouter::Route(const ChunkKey& key) {
  std::shared_ptr<const ClusterMap> members = this->members();
  std::vector<std::string> ids;
  for (const Member* owner : OrderedOwners(*members, key)) ids.push_back(owner->id);
  return ids;
}

absl::Status ChunkRouter::ReadFromOwners(const ChunkKey& key, uint32_t offset_in_chunk,
                                         std::span<char> out) {
  std::shared_ptr<const ClusterMap> members = this->members();
  std::vector<const Member*> owners = OrderedOwners(*members, key);
  if (owners.empty()) {
    return absl::UnavailableError(absl::StrCat("cache group '", options_.group,
                                               "' has no live member to read chunk ",
                                               key.ToString(), " from"));
  }
  absl::Status last;
  bool all_not_found = true;
  for (const Member* owner : owners) {
    auto client = clients_.Reader(*owner);
    absl::Status read =
        client.ok() ? (*client)->ReadChunk(key, offset_in_chunk, out) : client.status();
    if (read.ok() || !ShouldTryAnotherOwner(read)) return read;
    all_not_found = all_not_found && read.code() == absl::StatusCode::kNotFound;
    if (read.code() != absl::StatusCode::kNotFound) clients_.MarkSuspect(owner->id);
    GRANARY_LOG(WARNING) << "chunk " << key.ToString() << " from " << owner->id << " ("
                         << owner->address << "): " << read << "; trying the next owner";
    last = absl::Status(read.code(), absl::StrCat(owner->id, ": ", read.message()));
  }
  if (all_not_found) return last;
  return absl::UnavailableError(absl::StrCat("no owner of chunk ", key.ToString(),
                                             " in cache group '", options_.group,
                                             "' answered; last: ", last.message()));
}

absl::StatusOr<DatasetSnapshot> ChunkRouter::ManifestFromPeers(std::string_view name,
                                                               uint64_t version) {
  std::shared_ptr<const ClusterMap> members = this->members();
  std::vector<const Member*> peers;
  for (const Member& member : members->members()) {
    if (member.up && member.id != options_.local_node_id && !clients_.IsSuspect(member.id)) {
      peers.push_back(&member);
    }
  }
  std::stable_partition(peers.begin(), peers.end(),
                        [this](const Member* peer) { return peer->group == options_.group; });
  absl::Status last = absl::UnavailableError("no other member is known");
  for (const Member* peer : peers) {
    absl::StatusOr<const DatasetClient*> client = clients_.Reader(*peer);
    absl::StatusOr<DatasetSnapshot> snapshot =
        client.ok() ? (*client)->GetManifest(name, version) : client.status();
    if (snapshot.ok()) return snapshot;
    last = absl::Status(snapshot.status().code(),
                        absl::StrCat(peer->id, ": ", snapshot.status().message()));
  }
  return absl::UnavailableError(absl::StrCat("no other member answered for the manifest of '",
                                             AsAbsl(name), "'; last: ", last.message()));
}

}  // namespace granary
