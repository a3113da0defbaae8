#include "cache_server/catalog/catalog_sync.h"

#include <algorithm>
#include <random>

#include "absl/strings/str_cat.h"
#include "cache_server/cluster/peer_stub.h"
#include "common/base/logging.h"
#include "common/base/status.h"
#include "common/base/wall_clock.h"
#include "common/dataset/chunk_math.h"
#include "grpcpp/client_context.h"
#include "proto/granary.grpc.pb.h"

namespace granary {

absl::Status ValidatePeerRecord(const v1::CatalogDataset& record, int64_t now_unix_ms) {
  GRANARY_RETURN_IF_ERROR(ValidateDatasetName(record.name()));
  const int64_t latest = now_unix_ms + std::chrono::milliseconds(kMaxPeerClockAhead).count();
  if (record.updated_unix_ms() <= 0 || record.updated_unix_ms() > latest) {
    return absl::InvalidArgumentError(
        absl::StrCat("record of dataset '", record.name(), "' is dated ", record.updated_unix_ms(),
                     " ms, outside 0 to ", latest, " (this node's clock plus ",
                     kMaxPeerClockAhead.count(), " minutes)"));
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
    for (grpc::ClientContext* call : calls_) call->TryCancel();
  }
  wake_.SignalAll();
  work_.SignalAll();
  for (std::thread& pusher : pushers_) pusher.join();
  if (thread_.joinable()) thread_.join();
}

void CatalogSync::Start() {
  std::vector<Member> peers = cluster_->Peers();
  // Peers in random order, so that nodes starting together do not all ask
  // the same one first.
  std::shuffle(peers.begin(), peers.end(), std::mt19937_64(std::random_device{}()));
  for (size_t i = 0; i < kMaxParallelExchanges; ++i) {
    pushers_.emplace_back([this] { RunPusher(); });
  }
  OweAndWait(peers, kStartWait, /*until_one_succeeds=*/true);
  cluster_->OnChange([this] { MembersChanged(); });
  thread_ = std::thread([this] { Run(); });
}

void CatalogSync::PushToAll() {
  OweAndWait(cluster_->Peers(), kPushWait, /*until_one_succeeds=*/false);
}

void CatalogSync::OweAndWait(const std::vector<Member>& peers, std::chrono::milliseconds wait,
                             bool until_one_succeeds) {
  std::vector<std::string> ids;
  for (const Member& peer : peers) ids.push_back(peer.id);
  MutexLock lock(&mutex_);
  const uint64_t generation = ++generation_;
  const uint64_t succeeded_before = exchanges_succeeded_;
  OweLocked(peers);
  delivered_.WaitUntil(&mutex_, std::chrono::steady_clock::now() + wait,
                       [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
                         return (until_one_succeeds && exchanges_succeeded_ > succeeded_before) ||
                                SettledLocked(ids, generation);
                       });
}

void CatalogSync::OweLocked(const std::vector<Member>& peers) {
  for (const Member& member : peers) {
    PeerPush& peer = peers_[member.id];
    peer.member = member;
    peer.owed = generation_;
    if (peer.queued || peer.in_flight) continue;
    peer.queued = true;
    ready_.push_back(member.id);
  }
  work_.SignalAll();
}

bool CatalogSync::SettledLocked(const std::vector<std::string>& ids, uint64_t generation) const {
  for (const std::string& id : ids) {
    auto peer = peers_.find(id);
    if (peer == peers_.end()) continue;
    const PeerPush& push = peer->second;
    if (push.delivered < generation && push.backoff.count() == 0) return false;
  }
  return true;
}

void CatalogSync::RunPusher() {
  MutexLock lock(&mutex_);
  while (!stopping_) {
    const auto now = std::chrono::steady_clock::now();
    while (!retries_.empty() && retries_.begin()->first <= now) {
      ready_.push_back(retries_.begin()->second);
      retries_.erase(retries_.begin());
    }
    if (ready_.empty()) {
      const auto next_retry =
          retries_.empty() ? now + period_ : std::min(now + period_, retries_.begin()->first);
      work_.WaitUntil(&mutex_, next_retry);
      continue;
    }
    std::string id = std::move(ready_.front());
    ready_.pop_front();
    auto found = peers_.find(id);
    if (found == peers_.end()) continue;  // Left the cluster while queued.
    PeerPush& peer = found->second;
    peer.queued = false;
    // In flight already through an entry queued before it left and came
    // back: that exchange requeues it if it still owes one.
    if (peer.in_flight || peer.delivered >= peer.owed) continue;
    peer.in_flight = true;
    const uint64_t carried = generation_;
    const Member member = peer.member;
    mutex_.Unlock();
    absl::Status exchanged = CancellableExchange(member);
    mutex_.Lock();
    FinishedLocked(member, carried, exchanged);
  }
}

void CatalogSync::FinishedLocked(const Member& member, uint64_t carried,
                                 const absl::Status& exchanged) {
  if (exchanged.ok()) ++exchanges_succeeded_;
  delivered_.SignalAll();
  auto found = peers_.find(member.id);
  if (found == peers_.end()) return;  // Left the cluster meanwhile.
  PeerPush& peer = found->second;
  peer.in_flight = false;
  if (exchanged.ok()) {
    peer.delivered = std::max(peer.delivered, carried);
    peer.backoff = std::chrono::milliseconds(0);
    if (peer.owed > peer.delivered) {
      peer.queued = true;
      ready_.push_back(member.id);
    }
    return;
  }
  if (peer.backoff.count() == 0) {
    GRANARY_LOG(WARNING) << "catalog exchange with " << member.id << " (" << member.address
                         << ") failed: " << exchanged << "; retrying until it answers";
  }
  peer.backoff = std::min<std::chrono::milliseconds>(
      std::max<std::chrono::milliseconds>(peer.backoff * 2, kFirstRetryBackoff), kMaxRetryBackoff);
  peer.queued = true;
  retries_.emplace(std::chrono::steady_clock::now() + peer.backoff, member.id);
}

absl::Status CatalogSync::CancellableExchange(const Member& peer) {
  grpc::ClientContext context;
  {
    MutexLock lock(&mutex_);
    if (stopping_) return absl::CancelledError("catalog sync is stopping");
    calls_.insert(&context);
  }
  absl::Status exchanged = ExchangeWith(peer, &context);
  MutexLock lock(&mutex_);
  calls_.erase(&context);
  return exchanged;
}

absl::Status CatalogSync::ExchangeWith(const Member& peer, grpc::ClientContext* context) {
  GRANARY_ASSIGN_OR_RETURN(std::unique_ptr<v1::Granary::Stub> stub,
                           ConnectToPeer(cluster_->clients(), peer));
  v1::ExchangeCatalogRequest request;
  request.set_sender_id(cluster_->self().id);
  for (v1::CatalogDataset& record : catalog_->Records()) {
    *request.add_records() = std::move(record);
  }
  context->set_deadline(std::chrono::system_clock::now() +
                        cluster_->clients().options().client.manifest_timeout);
  v1::ExchangeCatalogResponse response;
  GRANARY_RETURN_IF_ERROR(FromGrpcStatus(stub->ExchangeCatalog(context, request, &response)));
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
  } else {
    HeardFrom(*sender);
    if (absl::Status merged = Merge(*sender, {request.records().begin(), request.records().end()});
        !merged.ok()) {
      // The sender still gets this catalog; its records come with a later
      // exchange.
      GRANARY_LOG(WARNING) << "catalog exchange from " << sender->id
                           << ": adopting its records failed: " << merged;
    }
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

void CatalogSync::HeardFrom(const Member& member) {
  MutexLock lock(&mutex_);
  auto found = peers_.find(member.id);
  if (found == peers_.end() || found->second.backoff.count() == 0) return;
  PeerPush& peer = found->second;
  peer.backoff = std::chrono::milliseconds(0);
  if (peer.in_flight) return;  // Its end requeues it if it still owes one.
  // Not in retries_ when a pusher has just moved it to ready_.
  if (std::erase_if(retries_, [&](const auto& retry) { return retry.second == member.id; }) > 0) {
    ready_.push_back(member.id);
    work_.SignalAll();
  }
}

void CatalogSync::MembersChanged() {
  std::vector<Member> peers = cluster_->Peers();
  absl::flat_hash_set<std::string> current;
  std::vector<Member> joined;
  MutexLock lock(&mutex_);
  for (const Member& peer : peers) {
    current.insert(peer.id);
    if (!peers_.contains(peer.id)) joined.push_back(peer);
  }
  // A member that left is owed nothing; a queued entry of it is skipped.
  absl::erase_if(peers_, [&](const auto& peer) {
    return !current.contains(peer.first) && !peer.second.in_flight;
  });
  if (!joined.empty()) OweLocked(joined);
}

void CatalogSync::Run() {
  std::mt19937_64 random(std::random_device{}());
  while (true) {
    {
      MutexLock lock(&mutex_);
      wake_.WaitUntil(&mutex_, std::chrono::steady_clock::now() + period_,
                      [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) { return stopping_; });
      if (stopping_) return;
    }
    std::vector<Member> peers = cluster_->Peers();
    if (peers.empty()) continue;
    const Member& peer = peers[random() % peers.size()];
    absl::Status exchanged = CancellableExchange(peer);
    if (!exchanged.ok()) {
      GRANARY_LOG(DEBUG) << "periodic catalog exchange with " << peer.id << ": " << exchanged;
    }
  }
}

}  // namespace granary
