// ClusterView is one granaryd's view of its cluster: who it is, the current
// ClusterMap (and the one before the last change, to find a chunk's previous
// owner), and a pooled connection to every peer. Membership sources
// (cache_server/membership) feed it through Update(); without one, the
// cluster is this node alone.
//
// A change builds a new map and swaps it in: calls in flight keep the map
// they started with, and listeners (catalog replication) are told after the
// swap, from the updating thread.
//
// Thread-safety: all methods may be called concurrently.
#ifndef GRANARY_CACHE_SERVER_CLUSTER_CLUSTER_VIEW_H_
#define GRANARY_CACHE_SERVER_CLUSTER_CLUSTER_VIEW_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "client/member_clients.h"
#include "common/base/mutex.h"
#include "common/cluster/cluster_map.h"
#include "common/dataset/chunk_key.h"

namespace granary {

class ClusterView {
 public:
  ClusterView(Member self, MemberClients::Options client_options);

  const Member& self() const { return self_; }
  MemberClients& clients() { return clients_; }

  // Replaces the member list. This node is always kept in it (as listed, or
  // as `self` if missing: it is alive, since it runs this code).
  // INVALID_ARGUMENT from ClusterMap::Build, leaving the view unchanged.
  absl::Status Update(std::vector<Member> members);
  // Called after every successful Update().
  void OnChange(std::function<void()> listener);

  std::shared_ptr<const ClusterMap> current() const;
  std::shared_ptr<const ClusterMap> previous() const;

  // Live members other than this node.
  std::vector<Member> Peers() const;
  // Live members of `group`, this node included if it belongs.
  std::vector<Member> GroupMembers(std::string_view group) const;

  // Whether this node is one of the first `replicas` live owners of `key` in
  // `group` (the owner and its replicas), skipping the members named in
  // `unreachable`.
  bool Owns(const ChunkKey& key, std::string_view group,
            const std::vector<std::string>& unreachable, uint32_t replicas) const;

  // The owner of `key` in this node's group when that is another node not
  // suspected of being down; nullopt when this node owns it.
  std::optional<Member> OwnerElsewhere(const ChunkKey& key);

  // The peers worth asking for a copy of chunk `key` before reading the
  // source, in order: in this node's group, the owner it would have without
  // this node (where it lived before this node joined) and its owner under
  // the previous map; then its owner in each other group. Peers suspected of
  // being down are left out.
  std::vector<Member> CopySources(const ChunkKey& key);

 private:
  const Member self_;
  MemberClients clients_;
  mutable Mutex mutex_;
  std::shared_ptr<const ClusterMap> current_ ABSL_GUARDED_BY(mutex_);
  std::shared_ptr<const ClusterMap> previous_ ABSL_GUARDED_BY(mutex_);
  std::vector<std::function<void()>> listeners_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_CLUSTER_CLUSTER_VIEW_H_
