#include "cache_server/catalog/catalog_sync.h"

#include <random>

#include "absl/strings/str_cat.h"
#include "cache_server/cluster/peer_stub.h"
#include "common/chunk_math.h"
#include "common/logging.h"
#include "common/parallel_for.h"
#include "common/status.h"
#include "common/wall_clock.h"
#include "grpcpp/client_context.h"
#include "proto/granary.grpc.pb.h"

namespace granary {
namespace {

constexpr size_t kMaxParallelExchanges = 16;
// How far ahead of this node's clock a peer's change may be dated: clocks of
// a cluster differ by less, and a record dated further (INT64_MAX, say) would
// win every later change for good.
constexpr std::chrono::minutes kMaxClockSkew{5};

}  // namespace

absl::Status ValidatePeerRecord(const v1::CatalogDataset& record, int64_t now_unix_ms) {
  GRANARY_RETURN_IF_ERROR(ValidateDatasetName(record.name()));
  const int64_t latest = now_unix_ms + std::chrono::milliseconds(kMaxClockSkew).count();
  if (record.updated_unix_ms() <= 0 || record.updated_unix_ms() > latest) {
    return absl::InvalidArgumentError(
        absl::StrCat("record of dataset '", record.name(), "' is dated ", record.updated_unix_ms(),
                     " ms, outside 0 to ", latest, " (this node's clock plus ",
                     kMaxClockSkew.count(), " minutes)"));
  }
  if (record.removed()) return absl::OkStatus();
  if (record.versions_size() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("record of dataset '", record.name(), "' has no version"));
  }
  if (!v1::FillPolicy_IsValid(record.fill())) {
    return absl::InvalidArgumentError(absl::StrCat("record of dataset '", record.name(),
                                                   "' has fill policy ", record.fill(),
                                                   ", not one this node knows"));
  }
  if (record.chunk_size() < kMinChunkSize || record.chunk_size() > kMaxChunkSize ||
      record.replicas() > kMaxReplicas) {
    return absl::InvalidArgumentError(
        absl::StrCat("record of dataset '", record.name(), "' has chunk size ", record.chunk_size(),
                     " and ", record.replicas(), " replicas, out of range"));
  }
  return absl::OkStatus();
}

CatalogSync::CatalogSync(Catalog* catalog, DatasetRegistry* registry, ClusterView* cluster,
                         std::chrono::milliseconds period)
    : catalog_(catalog), registry_(registry), cluster_(cluster), period_(period) {}

CatalogSync::~CatalogSync() {
  {
    MutexLock lock(&mutex_);
    stopping_ = true;
  }
  wake_.SignalAll();
  if (thread_.joinable()) thread_.join();
}

void CatalogSync::Start() {
  std::vector<Member> peers = cluster_->Peers();
  {
    MutexLock lock(&mutex_);
    for (const Member& peer : peers) known_peers_.insert(peer.id);
  }
  ExchangeWithAll(peers);
  cluster_->OnChange([this] { MembersChanged(); });
  thread_ = std::thread([this] { Run(); });
}

void CatalogSync::PushToAll() { ExchangeWithAll(cluster_->Peers()); }

void CatalogSync::ExchangeWithAll(const std::vector<Member>& peers) {
  ParallelFor(peers.size(), kMaxParallelExchanges, [&](size_t i) {
    absl::Status exchanged = ExchangeWith(peers[i]);
    if (!exchanged.ok()) {
      GRANARY_LOG(WARNING) << "catalog exchange with " << peers[i].id << " (" << peers[i].address
                           << ") failed: " << exchanged << "; a later exchange catches it up";
    }
  });
}

absl::Status CatalogSync::ExchangeWith(const Member& peer) {
  GRANARY_ASSIGN_OR_RETURN(std::unique_ptr<v1::Granary::Stub> stub,
                           ConnectToPeer(cluster_->clients(), peer));
  v1::ExchangeCatalogRequest request;
  request.set_sender_id(cluster_->self().id);
  for (v1::CatalogDataset& record : catalog_->Records()) {
    *request.add_records() = std::move(record);
  }
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       cluster_->clients().options().client.manifest_timeout);
  v1::ExchangeCatalogResponse response;
  GRANARY_RETURN_IF_ERROR(FromGrpcStatus(stub->ExchangeCatalog(&context, request, &response)));
  return Merge(peer, {response.records().begin(), response.records().end()});
}

absl::StatusOr<v1::ExchangeCatalogResponse> CatalogSync::Answer(
    const v1::ExchangeCatalogRequest& request) {
  std::shared_ptr<const ClusterMap> members = cluster_->current();
  const Member* sender = members->Find(request.sender_id());
  if (sender != nullptr && sender->id == cluster_->self().id) {
    GRANARY_LOG(WARNING) << "audit: refused a catalog exchange whose sender claims to be this "
                            "node ('"
                         << sender->id << "')";
  } else if (sender == nullptr) {
    // Not in this node's member list yet (etcd watches lag a little): its
    // manifests cannot be fetched now, but it still learns this catalog, and
    // this node catches up when the sender appears.
    GRANARY_LOG(INFO) << "catalog exchange from unknown member '"
                      << request.sender_id().substr(0, 128) << "': answering without adopting its "
                      << "records";
  } else if (absl::Status merged =
                 Merge(*sender, {request.records().begin(), request.records().end()});
             !merged.ok()) {
    // The sender still gets this catalog; its records come with a later
    // exchange.
    GRANARY_LOG(WARNING) << "catalog exchange from " << sender->id
                         << ": adopting its records failed: " << merged;
  }
  v1::ExchangeCatalogResponse response;
  for (v1::CatalogDataset& record : catalog_->Records()) {
    *response.add_records() = std::move(record);
  }
  return response;
}

absl::Status CatalogSync::Merge(const Member& from,
                                const std::vector<v1::CatalogDataset>& records) {
  GRANARY_ASSIGN_OR_RETURN(const DatasetClient* reader, cluster_->clients().Reader(from));
  const int64_t now = NowUnixMs();
  for (const v1::CatalogDataset& record : records) {
    // One refused record never keeps the others out.
    absl::Status adopted = ValidatePeerRecord(record, now);
    if (adopted.ok() && !catalog_->IsNewer(record)) continue;
    if (adopted.ok()) adopted = AdoptFrom(from, *reader, record);
    if (!adopted.ok()) {
      GRANARY_LOG(WARNING) << "audit: refused a catalog record from node " << from.id << " ("
                           << from.address << "): " << adopted;
    }
  }
  return absl::OkStatus();
}

absl::Status CatalogSync::AdoptFrom(const Member& from, const DatasetClient& reader,
                                    const v1::CatalogDataset& record) {
  std::vector<std::shared_ptr<const Manifest>> manifests;
  for (const v1::CatalogVersion& version : record.versions()) {
    if (catalog_->HasVersion(version.version())) continue;
    absl::StatusOr<DatasetSnapshot> snapshot = reader.GetManifest(record.name(), version.version());
    if (!snapshot.ok()) {
      return absl::Status(snapshot.status().code(),
                          absl::StrCat("manifest of dataset '", record.name(), "' from ", from.id,
                                       ": ", snapshot.status().message()));
    }
    manifests.push_back(std::make_shared<const Manifest>(std::move(snapshot->manifest)));
  }
  absl::StatusOr<bool> changed = registry_->Adopt(record, manifests);
  if (!changed.ok()) {
    return absl::Status(changed.status().code(), absl::StrCat("dataset '", record.name(),
                                                              "': ", changed.status().message()));
  }
  if (*changed) {
    GRANARY_LOG(INFO) << "audit: node " << from.id << " (catalog exchange) "
                      << (record.removed() ? "removed" : "changed") << " dataset '" << record.name()
                      << "' (source " << record.source() << "): OK";
  }
  return absl::OkStatus();
}

void CatalogSync::MembersChanged() {
  std::vector<Member> peers = cluster_->Peers();
  {
    MutexLock lock(&mutex_);
    for (const Member& peer : peers) {
      if (known_peers_.insert(peer.id).second) pending_.push_back(peer);
    }
    if (pending_.empty()) return;
  }
  wake_.SignalAll();
}

void CatalogSync::Run() {
  std::mt19937_64 random(std::random_device{}());
  auto next_round = std::chrono::steady_clock::now() + period_;
  while (true) {
    std::vector<Member> pending;
    {
      MutexLock lock(&mutex_);
      wake_.WaitUntil(&mutex_, next_round, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
        return stopping_ || !pending_.empty();
      });
      if (stopping_) return;
      pending.swap(pending_);
    }
    if (!pending.empty()) {
      ExchangeWithAll(pending);
      continue;
    }
    next_round = std::chrono::steady_clock::now() + period_;
    std::vector<Member> peers = cluster_->Peers();
    if (peers.empty()) continue;
    const Member& peer = peers[random() % peers.size()];
    absl::Status exchanged = ExchangeWith(peer);
    if (!exchanged.ok()) {
      GRANARY_LOG(DEBUG) << "periodic catalog exchange with " << peer.id << ": " << exchanged;
    }
  }
}

}  // namespace granary
