// ChunkRouter sends each chunk read straight to the chunk's owner in the
// reader's own cache group, so traffic stays under the switch and only the
// owner ever reads a miss from the source. The local node is reached over its
// Unix socket, others over TCP, through one pooled DatasetClient per member.
//
// Failover: if the owner does not answer (unreachable, deadline, transport or
// server fault), the next owner on the ring is asked, up to `attempts` owners.
// A member that failed is tried last for `suspect_period`, so a dead node
// costs one deadline, not one per read, and is routed around within seconds.
// Answers that would be the same everywhere (OUT_OF_RANGE, INVALID_ARGUMENT,
// FAILED_PRECONDITION for a changed source file, PERMISSION_DENIED) are
// returned at once. When no owner answers the result is UNAVAILABLE, and the
// caller reads the source itself.
//
// Thread-safety: all methods may be called concurrently; UpdateMembers()
// swaps the view without blocking reads in flight.
#ifndef GRANARY_CLIENT_CHUNK_ROUTER_H_
#define GRANARY_CLIENT_CHUNK_ROUTER_H_

#include <chrono>
#include <memory>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "client/dataset_client.h"
#include "client/member_clients.h"
#include "common/base/mutex.h"
#include "common/cluster/cluster_map.h"

namespace granary {

class ChunkRouter {
 public:
  struct Options {
    std::string group = kDefaultGroup;  // The reader's cache group.
    std::string local_node_id;          // Reached at local_address instead of its TCP address.
    std::string local_address;          // "unix:PATH" of the local granaryd.
    size_t attempts = 2;                // Owners tried per chunk: the owner and one replica.
    std::chrono::milliseconds suspect_period{3000};
    DatasetClient::Options client;  // Deadlines and the cluster token.
  };

  ChunkRouter(Options options, std::shared_ptr<const ClusterMap> members);

  void UpdateMembers(std::shared_ptr<const ClusterMap> members);
  std::shared_ptr<const ClusterMap> members() const;

  // Reads `out.size()` bytes at `offset_in_chunk` of chunk `key` from its
  // owners, as described above.
  absl::Status ReadFromOwners(const ChunkKey& key, uint32_t offset_in_chunk, std::span<char> out);

  // The manifest of `version` of dataset `name` from the first other member
  // that answers, members of the reader's group first (every member holds
  // the cluster's catalog): for when the local granaryd cannot answer.
  // UNAVAILABLE naming the last failure when none answers.
  absl::StatusOr<DatasetSnapshot> ManifestFromPeers(std::string_view name, uint64_t version);

  // The member ids that own `key` in the reader's group, in the order they
  // would be asked now.
  std::vector<std::string> Route(const ChunkKey& key);

 private:
  std::vector<const Member*> OrderedOwners(const ClusterMap& members, const ChunkKey& key);

  const Options options_;
  MemberClients clients_;
  mutable Mutex mutex_;
  std::shared_ptr<const ClusterMap> members_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace granary

#endif  // GRANARY_CLIENT_CHUNK_ROUTER_H_
