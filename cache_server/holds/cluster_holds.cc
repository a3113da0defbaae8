#include "cache_server/holds/cluster_holds.h"

#include "common/base/logging.h"
#include "common/base/parallel_for.h"
#include "common/base/status.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "proto/staging.grpc.pb.h"

namespace granary {
namespace {

// Members are asked at once, so that one that does not answer costs a
// call's timeout, not one per member after it.
constexpr size_t kMaxParallelCalls = 32;

// This node and its live peers.
std::vector<Member> LiveMembers(ClusterView* cluster) {
  std::vector<Member> members = cluster->Peers();
  members.insert(members.begin(), cluster->self());
  return members;
}

// The live members of `groups`, in their order.
std::vector<Member> MembersOf(ClusterView* cluster, const std::vector<std::string>& groups) {
  std::vector<Member> members;
  for (const std::string& group : groups) {
    for (Member& member : cluster->GroupMembers(group)) members.push_back(std::move(member));
  }
  return members;
}

}  // namespace

ClusterHolds::ClusterHolds(HoldTable* local, ClusterView* cluster)
    : local_(local), cluster_(cluster) {}

absl::Status ClusterHolds::Place(const std::string& holder,
                                 const std::vector<std::string>& datasets,
                                 const std::vector<std::string>& groups,
                                 std::chrono::milliseconds lease) {
  v1::PlaceHoldRequest request;
  request.set_holder(holder);
  for (const std::string& dataset : datasets) request.add_datasets(dataset);
  request.set_lease_ms(static_cast<uint32_t>(lease.count()));
  const std::vector<Member> members = MembersOf(cluster_, groups);
  std::vector<absl::Status> placed(members.size());
  ParallelFor(members.size(), kMaxParallelCalls,
              [&](size_t i) { placed[i] = PlaceOn(members[i], request); });
  for (const absl::Status& status : placed) {
    if (!status.ok()) {
      Release(holder);
      return status;
    }
  }
  return absl::OkStatus();
}

void ClusterHolds::Release(const std::string& holder) {
  const std::vector<Member> members = LiveMembers(cluster_);
  ParallelFor(members.size(), kMaxParallelCalls, [&](size_t i) { ReleaseOn(members[i], holder); });
}

void ClusterHolds::ReleaseIn(const std::string& holder, const std::vector<std::string>& groups) {
  const std::vector<Member> members = MembersOf(cluster_, groups);
  ParallelFor(members.size(), kMaxParallelCalls, [&](size_t i) { ReleaseOn(members[i], holder); });
}

v1::ListHoldsResponse ClusterHolds::List() {
  const std::vector<Member> members = LiveMembers(cluster_);
  std::vector<v1::NodeHolds> nodes(members.size());
  ParallelFor(members.size(), kMaxParallelCalls, [&](size_t i) { nodes[i] = ListOn(members[i]); });
  v1::ListHoldsResponse response;
  for (v1::NodeHolds& node : nodes) *response.add_nodes() = std::move(node);
  return response;
}

v1::NodeHolds ClusterHolds::ListOn(const Member& member) {
  if (IsSelf(member)) return local_->List();
  v1::ListHoldsRequest request;
  request.set_local_only(true);
  v1::ListHoldsResponse answer;
  absl::Status asked = [&]() -> absl::Status {
    GRANARY_ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel,
                             cluster_->clients().Channel(member));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + kCallTimeout);
    return FromGrpcStatus(v1::Staging::NewStub(channel)->ListHolds(&context, request, &answer));
  }();
  if (asked.ok() && answer.nodes_size() == 1) return answer.nodes(0);
  v1::NodeHolds node;
  node.set_node_id(member.id);
  node.set_group(member.group);
  node.set_error(asked.ok() ? "answered for no node" : std::string(asked.message()));
  return node;
}

absl::Status ClusterHolds::PlaceOn(const Member& member, const v1::PlaceHoldRequest& request) {
  absl::Status placed;
  if (IsSelf(member)) {
    placed = local_->Place(request.holder(), {request.datasets().begin(), request.datasets().end()},
                           std::chrono::milliseconds(request.lease_ms()));
  } else {
    absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = cluster_->clients().Channel(member);
    if (channel.ok()) {
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + kCallTimeout);
      v1::PlaceHoldResponse response;
      placed =
          FromGrpcStatus(v1::Staging::NewStub(*channel)->PlaceHold(&context, request, &response));
    } else {
      placed = channel.status();
    }
  }
  if (placed.ok() || placed.code() == absl::StatusCode::kResourceExhausted) return placed;
  GRANARY_LOG(WARNING) << "holds: no hold for " << request.holder() << " on " << member.id << ": "
                       << placed;
  return absl::OkStatus();
}

void ClusterHolds::ReleaseOn(const Member& member, const std::string& holder) {
  if (IsSelf(member)) {
    local_->Release(holder);
    return;
  }
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = cluster_->clients().Channel(member);
  absl::Status released = channel.status();
  if (channel.ok()) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + kCallTimeout);
    v1::ReleaseHoldRequest request;
    request.set_holder(holder);
    v1::ReleaseHoldResponse response;
    released =
        FromGrpcStatus(v1::Staging::NewStub(*channel)->ReleaseHold(&context, request, &response));
  }
  if (!released.ok()) {
    GRANARY_LOG(WARNING) << "holds: " << holder << " not released on " << member.id
                         << " (its lease lapses): " << released;
  }
}

}  // namespace granary
