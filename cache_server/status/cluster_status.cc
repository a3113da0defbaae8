#include "cache_server/status/cluster_status.h"

#include <algorithm>
#include <map>
#include <memory>
#include <tuple>
#include <utility>

#include "cache_server/cluster/peer_stub.h"
#include "common/base/logging.h"
#include "common/base/parallel_for.h"
#include "common/base/status.h"
#include "common/scheduling/locality_share.h"
#include "grpcpp/client_context.h"

namespace granary {
namespace {

v1::NodeStatus ListedOnly(const Member& member, const char* state) {
  v1::NodeStatus node;
  node.set_node_id(member.id);
  node.set_group(member.group);
  node.set_address(member.address);
  node.set_state(state);
  return node;
}

}  // namespace

ClusterStatus::ClusterStatus(Parts parts)
    : parts_(parts), started_(std::chrono::steady_clock::now()) {}

v1::StatusResponse ClusterStatus::Status(bool local_only) const {
  v1::StatusResponse response;
  response.set_dataset_count(parts_.catalog->Size());
  *response.add_nodes() = LocalStatus();
  if (local_only) return response;
  std::vector<Member> peers = parts_.cluster->Peers();
  std::vector<v1::NodeStatus> statuses;
  for (const Member& peer : peers) statuses.push_back(ListedOnly(peer, "unreachable"));
  AskPeers(peers, [&](v1::Granary::Stub& stub, grpc::ClientContext* call, size_t i) {
    v1::StatusRequest request;
    request.set_local_only(true);
    v1::StatusResponse answer;
    grpc::Status status = stub.Status(call, request, &answer);
    if (status.ok() && answer.nodes_size() == 1) statuses[i] = answer.nodes(0);
    return status;
  });
  std::shared_ptr<const ClusterMap> members = parts_.cluster->current();
  for (const Member& member : members->members()) {
    if (!member.up) statuses.push_back(ListedOnly(member, "down"));
  }
  for (v1::NodeStatus& node : statuses) *response.add_nodes() = std::move(node);
  std::sort(response.mutable_nodes()->begin(), response.mutable_nodes()->end(),
            [](const v1::NodeStatus& a, const v1::NodeStatus& b) {
              return std::tie(a.group(), a.node_id()) < std::tie(b.group(), b.node_id());
            });
  return response;
}

absl::StatusOr<v1::LocateResponse> ClusterStatus::Locate(const std::string& name, bool local_only,
                                                         bool fresh) const {
  GRANARY_ASSIGN_OR_RETURN(v1::LocateResponse response, LocateLocally(name));
  if (!local_only && fresh) AddPeersAsked(response);
  if (!local_only && !fresh) AddPeersPublished(response);
  // Members of a group own distinct copies of its chunks, so a group's bytes
  // are the sum of its members' bytes.
  std::map<std::string, uint64_t> group_bytes;
  for (const v1::NodeLocality& node : response.nodes()) {
    group_bytes[node.group()] += node.cached_bytes();
  }
  const uint64_t total = response.total_bytes();
  const uint32_t replicas = response.replicas();
  for (v1::NodeLocality& node : *response.mutable_nodes()) {
    node.set_node_fraction(LocalityShare(node.cached_bytes(), total, 1));
    node.set_group_fraction(LocalityShare(group_bytes[node.group()], total, replicas));
  }
  std::sort(response.mutable_nodes()->begin(), response.mutable_nodes()->end(),
            [](const v1::NodeLocality& a, const v1::NodeLocality& b) {
              return std::tie(a.group(), a.node_id()) < std::tie(b.group(), b.node_id());
            });
  for (const auto& [group, bytes] : group_bytes) {
    v1::GroupLocality* locality = response.add_groups();
    locality->set_group(group);
    locality->set_cached_bytes(bytes);
    locality->set_fraction(LocalityShare(bytes, total, replicas));
  }
  return response;
}

// A peer on another version of the dataset (a refresh not yet replicated)
// holds none of this version's bytes, and is left out of both kinds of answer.
void ClusterStatus::AddPeersAsked(v1::LocateResponse& response) const {
  std::vector<Member> peers = parts_.cluster->Peers();
  std::vector<v1::LocateResponse> answers(peers.size());
  AskPeers(peers, [&](v1::Granary::Stub& stub, grpc::ClientContext* call, size_t i) {
    v1::LocateRequest request;
    request.set_name(response.name());
    request.set_local_only(true);
    return stub.Locate(call, request, &answers[i]);
  });
  for (const v1::LocateResponse& answer : answers) {
    if (answer.version() != response.version()) continue;
    for (const v1::NodeLocality& node : answer.nodes()) *response.add_nodes() = node;
  }
}

void ClusterStatus::AddPeersPublished(v1::LocateResponse& response) const {
  for (LocalityBoard::PeerHolding& peer : parts_.locality->HoldingsOf(response.name())) {
    if (peer.holding && peer.holding->version() != response.version()) continue;
    v1::NodeLocality* node = response.add_nodes();
    node->set_node_id(std::move(peer.node_id));
    node->set_group(std::move(peer.group));
    node->set_age_ms(peer.age_ms);
    if (!peer.holding) continue;
    node->set_cached_bytes(peer.holding->cached_bytes());
    if (peer.holding->has_fill()) *node->mutable_fill() = std::move(*peer.holding->mutable_fill());
  }
}

v1::NodeStatus ClusterStatus::LocalStatus() const {
  store::StoreStats stats = parts_.store->Stats();
  const Member& self = parts_.cluster->self();
  v1::NodeStatus node;
  node.set_node_id(self.id);
  node.set_group(self.group);
  node.set_address(self.address);
  node.set_state("up");
  node.set_capacity_bytes(stats.capacity_bytes);
  // What the capacity counts, as the disk does: each chunk in whole blocks,
  // so that a cache of tiny files shows itself as full as it is.
  node.set_used_bytes(stats.disk_bytes);
  node.set_chunk_count(stats.chunk_count);
  node.set_hits(parts_.metrics->hits.load());
  node.set_misses(parts_.metrics->misses.load());
  node.set_bytes_from_cache(parts_.metrics->bytes_from_cache.load());
  node.set_bytes_from_source(parts_.metrics->bytes_from_source.load());
  node.set_checksum_failures(stats.checksum_failures);
  node.set_io_engine(stats.io_engine);
  node.set_uptime_seconds(
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - started_)
          .count());
  for (v1::FillProgress& fill : parts_.fills->Progress()) *node.add_fills() = std::move(fill);
  for (v1::UnloadableDataset& unloadable : parts_.catalog->Unloadable()) {
    *node.add_unloadable_datasets() = std::move(unloadable);
  }
  return node;
}

absl::StatusOr<v1::LocateResponse> ClusterStatus::LocateLocally(const std::string& name) const {
  GRANARY_ASSIGN_OR_RETURN(v1::DatasetInfo info, parts_.registry->Get(name));
  v1::LocateResponse response;
  response.set_name(info.name());
  response.set_version(info.version());
  response.set_total_bytes(info.total_bytes());
  response.set_replicas(info.replicas());
  v1::NodeLocality* node = response.add_nodes();
  node->set_node_id(parts_.cluster->self().id);
  node->set_group(parts_.cluster->self().group);
  node->set_cached_bytes(info.cached_bytes());
  for (v1::FillProgress& fill : parts_.fills->Progress()) {
    if (fill.version() == info.version()) *node->mutable_fill() = std::move(fill);
  }
  return response;
}

void ClusterStatus::AskPeers(
    const std::vector<Member>& peers,
    const std::function<grpc::Status(v1::Granary::Stub&, grpc::ClientContext*, size_t)>& ask)
    const {
  const auto deadline = std::chrono::system_clock::now() + kPeerAnswerWait;
  ParallelFor(peers.size(), kMaxParallelPeerCalls, [&](size_t i) {
    absl::StatusOr<std::unique_ptr<v1::Granary::Stub>> stub =
        ConnectToPeerUnlessRefused(parts_.cluster->clients(), peers[i], deadline);
    if (!stub.ok()) {
      GRANARY_LOG(DEBUG) << "peer " << peers[i].id << " not asked: " << stub.status().message();
      return;
    }
    grpc::ClientContext context;
    context.set_deadline(deadline);
    grpc::Status status = ask(**stub, &context, i);
    if (!status.ok()) {
      GRANARY_LOG(DEBUG) << "peer " << peers[i].id << " did not answer: " << status.error_message();
    }
  });
}

}  // namespace granary
