#include "tests/support/granary_cluster.h"

#include <algorithm>
#include <fstream>
#include <functional>
#include <optional>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/status.h"
#include "common/dataset/chunk_math.h"
#include "grpcpp/client_context.h"

namespace granary::testing {

absl::StatusOr<std::unique_ptr<GranaryCluster>> GranaryCluster::Start(Options options) {
  // The ports were free when chosen, but a test running beside this one may
  // bind one first: then the cluster starts again on other ports.
  constexpr int kAttempts = 3;
  absl::Status started;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    std::unique_ptr<GranaryCluster> cluster(new GranaryCluster(options));
    cluster->members_file_ = cluster->temp_.path() + "/members.yaml";
    cluster->token_file_ = cluster->temp_.path() + "/token";
    GRANARY_RETURN_IF_ERROR(WriteRandomClusterToken(cluster->token_file_).status());
    for (const ClusterNode& spec : cluster->options_.nodes) {
      cluster->nodes_.push_back({spec, FreeTcpPort(), nullptr});
    }
    if (cluster->options_.etcd_endpoint.empty()) {
      GRANARY_RETURN_IF_ERROR(cluster->WriteMembersFile());
    }
    started = absl::OkStatus();
    for (Node& node : cluster->nodes_) {
      started = cluster->StartNode(&node);
      if (!started.ok()) break;
    }
    if (started.ok()) return cluster;
    if (!absl::StrContains(started.message(), "Address already in use")) return started;
  }
  return started;
}

std::vector<Member> GranaryCluster::Members() const {
  std::vector<Member> members;
  for (const Node& node : nodes_) {
    members.push_back(
        {node.spec.id, absl::StrCat(node.spec.host, ":", node.tcp_port), node.spec.group});
  }
  return members;
}

absl::Status GranaryCluster::WriteMembersFile() const {
  // Written aside and renamed, so a reloading node never reads half a file.
  std::string staged = members_file_ + ".new";
  {
    std::ofstream out(staged);
    out << "members:\n";
    for (const Member& member : Members()) {
      out << "  - id: " << member.id << "\n    address: " << member.address
          << "\n    group: " << member.group << "\n";
    }
    if (!out) return absl::InternalError(absl::StrCat("cannot write ", staged));
  }
  if (std::rename(staged.c_str(), members_file_.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("cannot rename ", staged));
  }
  return absl::OkStatus();
}

absl::Status GranaryCluster::StartNode(Node* node) {
  GranarydOptions options;
  options.tcp_port = node->tcp_port;
  options.host = node->spec.host;
  options.command_prefix = node->spec.command_prefix;
  options.cluster_token_file = token_file_;
  options.extra_args = {"--node-id", node->spec.id, "--group", node->spec.group};
  if (options_.etcd_endpoint.empty()) {
    options.extra_args.insert(options.extra_args.end(), {"--members", members_file_});
  } else {
    options.extra_args.insert(options.extra_args.end(), {"--etcd", options_.etcd_endpoint,
                                                         "--config", temp_.path() + "/etcd.yaml"});
    std::ofstream(temp_.path() + "/etcd.yaml") << "etcd_lease_ttl: 2\n";
  }
  options.extra_args.insert(options.extra_args.end(), options_.extra_args.begin(),
                            options_.extra_args.end());
  GRANARY_ASSIGN_OR_RETURN(node->process, GranarydProcess::Start(std::move(options)));
  return absl::OkStatus();
}

absl::StatusOr<size_t> GranaryCluster::AddNode(ClusterNode spec) {
  nodes_.push_back({std::move(spec), FreeTcpPort(), nullptr});
  if (options_.etcd_endpoint.empty()) GRANARY_RETURN_IF_ERROR(WriteMembersFile());
  GRANARY_RETURN_IF_ERROR(StartNode(&nodes_.back()));
  return nodes_.size() - 1;
}

namespace {

// Calls `done` every 100 ms until it returns true or `timeout` has passed;
// returns whether it did.
bool PollUntil(std::chrono::milliseconds timeout, const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return true;
}

}  // namespace

absl::Status GranaryCluster::WaitForMembers(size_t i, std::vector<std::string> ids,
                                            std::chrono::milliseconds timeout) {
  std::sort(ids.begin(), ids.end());
  std::vector<std::string> seen;
  const bool listed = PollUntil(timeout, [&] {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
    v1::GetMembersResponse response;
    seen.clear();
    if (!node(i).SocketStub()->GetMembers(&context, v1::GetMembersRequest(), &response).ok()) {
      return false;
    }
    for (const v1::MemberInfo& member : response.members()) {
      if (member.up()) seen.push_back(member.id());
    }
    std::sort(seen.begin(), seen.end());
    return seen == ids;
  });
  if (listed) return absl::OkStatus();
  return absl::DeadlineExceededError(absl::StrCat("node ", spec(i).id, " sees members [",
                                                  absl::StrJoin(seen, ", "), "], not [",
                                                  absl::StrJoin(ids, ", "), "]"));
}

absl::StatusOr<std::unique_ptr<GranaryCluster>> GranaryCluster::StartFormed(Options options) {
  GRANARY_ASSIGN_OR_RETURN(std::unique_ptr<GranaryCluster> cluster, Start(std::move(options)));
  GRANARY_RETURN_IF_ERROR(cluster->WaitUntilFormed());
  return cluster;
}

absl::Status GranaryCluster::WaitUntilFormed(std::chrono::milliseconds timeout) {
  std::vector<std::string> ids;
  for (const Node& node : nodes_) ids.push_back(node.spec.id);
  for (size_t i = 0; i < size(); ++i) GRANARY_RETURN_IF_ERROR(WaitForMembers(i, ids, timeout));
  return WaitForPeersReachable(timeout);
}

absl::StatusOr<v1::DatasetInfo> GranaryCluster::RegisterDataset(size_t via, const std::string& name,
                                                                const std::string& source,
                                                                uint32_t chunk_size,
                                                                uint32_t replicas) {
  v1::AddDatasetRequest request;
  request.set_name(name);
  request.set_source(source);
  request.set_chunk_size(chunk_size);
  request.set_replicas(replicas);
  grpc::ClientContext context;
  v1::DatasetInfo info;
  GRANARY_RETURN_IF_ERROR(
      FromGrpcStatus(node(via).SocketStub()->AddDataset(&context, request, &info)));
  for (size_t i = 0; i < size(); ++i) {
    GRANARY_RETURN_IF_ERROR(WaitForDataset(i, name, info.version()).status());
  }
  return info;
}

absl::Status GranaryCluster::WaitForPeersReachable(std::chrono::milliseconds timeout) {
  for (size_t i = 0; i < size(); ++i) {
    std::vector<std::string> down;
    const bool reached = PollUntil(timeout, [&] {
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
      v1::StatusResponse response;
      grpc::Status asked = node(i).SocketStub()->Status(&context, v1::StatusRequest(), &response);
      down.clear();
      if (!asked.ok()) {
        down.push_back(asked.error_message());
        return false;
      }
      for (const v1::NodeStatus& member : response.nodes()) {
        if (member.state() != "up") down.push_back(member.node_id());
      }
      return down.empty() && static_cast<size_t>(response.nodes_size()) == size();
    });
    if (!reached) {
      return absl::DeadlineExceededError(
          absl::StrCat("node ", spec(i).id, " cannot reach [", absl::StrJoin(down, ", "), "]"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::DatasetInfo> GranaryCluster::WaitForDataset(size_t i, const std::string& name,
                                                               uint64_t version,
                                                               std::chrono::milliseconds timeout) {
  std::string seen = "no such dataset";
  std::optional<v1::DatasetInfo> found;
  const bool listed = PollUntil(timeout, [&] {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
    v1::ListDatasetsResponse response;
    grpc::Status asked =
        node(i).SocketStub()->ListDatasets(&context, v1::ListDatasetsRequest(), &response);
    if (!asked.ok()) seen = asked.error_message();
    for (const v1::DatasetInfo& dataset : response.datasets()) {
      if (dataset.name() != name) continue;
      if (version == 0 || dataset.version() == version) {
        found = dataset;
        return true;
      }
      seen = absl::StrCat("version ", dataset.version());
    }
    return false;
  });
  if (listed) return *std::move(found);
  return absl::DeadlineExceededError(absl::StrCat("node ", spec(i).id, " lists dataset '", name,
                                                  "' with ", seen, ", not version ", version,
                                                  " within ", timeout.count(), " ms"));
}

absl::Status GranaryCluster::WaitForPublishedLocality(size_t i, const std::string& dataset,
                                                      std::chrono::milliseconds timeout) {
  auto bytes_by_node = [&](bool fresh) -> absl::StatusOr<std::map<std::string, uint64_t>> {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::LocateRequest request;
    request.set_name(dataset);
    request.set_fresh(fresh);
    v1::LocateResponse response;
    GRANARY_RETURN_IF_ERROR(
        FromGrpcStatus(node(i).SocketStub()->Locate(&context, request, &response)));
    std::map<std::string, uint64_t> bytes;
    for (const v1::NodeLocality& located : response.nodes()) {
      bytes[located.node_id()] = located.cached_bytes();
    }
    return bytes;
  };
  absl::Status failed;
  absl::StatusOr<std::map<std::string, uint64_t>> fresh, published;
  const bool matched = PollUntil(timeout, [&] {
    fresh = bytes_by_node(true);
    published = bytes_by_node(false);
    failed = !fresh.ok() ? fresh.status() : published.status();
    return !failed.ok() || *published == *fresh;
  });
  GRANARY_RETURN_IF_ERROR(failed);
  if (matched) return absl::OkStatus();
  return absl::DeadlineExceededError(
      absl::StrCat("node ", spec(i).id, " has published figures of ", published->size(),
                   " nodes for '", dataset, "' that differ from a fresh Locate's ", fresh->size()));
}

std::map<std::string, int> ChunksPerOwner(const Manifest& manifest, const ClusterMap& map,
                                          std::string_view group) {
  std::map<std::string, int> owned;
  for (uint64_t id = 0; id < manifest.entries().size(); ++id) {
    const ManifestEntry& entry = manifest.entries()[id];
    if (entry.type != EntryType::kFile) continue;
    for (uint32_t chunk = 0; chunk < ChunkCount(entry.size, manifest.chunk_size()); ++chunk) {
      ++owned[map.Owners({manifest.version(), id, chunk}, group, 1)[0]->id];
    }
  }
  return owned;
}

}  // namespace granary::testing
