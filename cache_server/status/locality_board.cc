#include "cache_server/status/locality_board.h"

#include <algorithm>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "cache_server/cluster/peer_stub.h"
#include "common/base/logging.h"
#include "common/base/status.h"
#include "common/base/wall_clock.h"
#include "proto/granary.grpc.pb.h"

namespace granary {
namespace {

int64_t Milliseconds(std::chrono::steady_clock::duration duration) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(duration).count();
}

}  // namespace

absl::Status ValidateLocalityReport(const v1::LocalityReport& report, int64_t now_unix_ms,
                                    size_t max_holdings) {
  const std::string node = absl::StrCat("locality report of node '", report.node_id(), "'");
  const int64_t latest = now_unix_ms + std::chrono::milliseconds(kMaxPeerClockAhead).count();
  if (report.published_unix_ms() <= 0 || report.heartbeat_unix_ms() > latest) {
    return absl::InvalidArgumentError(
        absl::StrCat(node, " is dated ", report.published_unix_ms(), " ms with a heartbeat at ",
                     report.heartbeat_unix_ms(), " ms, outside 0 to ", latest,
                     " (this node's clock plus ", kMaxPeerClockAhead.count(), " minutes)"));
  }
  if (report.heartbeat_unix_ms() < report.published_unix_ms()) {
    return absl::InvalidArgumentError(absl::StrCat(node, " has a heartbeat before its holdings"));
  }
  if (report.age_ms() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(node, " has a negative age"));
  }
  if (report.heartbeat_only() && report.holdings_size() > 0) {
    return absl::InvalidArgumentError(absl::StrCat(node, " is a heartbeat with holdings"));
  }
  if (static_cast<size_t>(report.holdings_size()) > max_holdings) {
    return absl::InvalidArgumentError(absl::StrCat(node, " has ", report.holdings_size(),
                                                   " holdings, more than the ", max_holdings,
                                                   " datasets a catalog may hold"));
  }
  for (const v1::DatasetHolding& holding : report.holdings()) {
    absl::Status name = ValidateDatasetName(holding.name());
    if (!name.ok()) return absl::InvalidArgumentError(absl::StrCat(node, ": ", name.message()));
    if (holding.version() == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(node, " names dataset '", holding.name(), "' without a version"));
    }
  }
  return absl::OkStatus();
}

LocalityBoard::LocalityBoard(DatasetRegistry* registry, FillScheduler* fills, ClusterView* cluster,
                             Options options)
    : registry_(registry), fills_(fills), cluster_(cluster), options_(options) {}

LocalityBoard::~LocalityBoard() {
  {
    MutexLock lock(&mutex_);
    stopping_ = true;
    if (call_ != nullptr) call_->TryCancel();
  }
  wake_.SignalAll();
  if (thread_.joinable()) thread_.join();
}

void LocalityBoard::Start() { thread_ = std::thread(&LocalityBoard::Run, this); }

v1::LocalityReport LocalityBoard::OwnReport() {
  v1::LocalityReport report;
  report.set_node_id(cluster_->self().id);
  report.set_group(cluster_->self().group);
  std::vector<v1::FillProgress> fills = fills_->Progress();
  for (const v1::DatasetInfo& info : registry_->List()) {
    auto fill = std::find_if(fills.begin(), fills.end(), [&](const v1::FillProgress& progress) {
      return progress.name() == info.name() && progress.version() == info.version();
    });
    if (info.cached_bytes() == 0 && fill == fills.end()) continue;
    v1::DatasetHolding* holding = report.add_holdings();
    holding->set_name(info.name());
    holding->set_version(info.version());
    holding->set_cached_bytes(info.cached_bytes());
    if (fill != fills.end()) *holding->mutable_fill() = std::move(*fill);
  }
  std::string holdings;
  for (const v1::DatasetHolding& holding : report.holdings()) {
    holdings += holding.SerializeAsString();
  }
  // Stamps only ever grow, so that a clock stepped back does not make this
  // node's next reports lose to its last ones.
  const int64_t now = NowUnixMs();
  MutexLock lock(&mutex_);
  if (own_published_unix_ms_ == 0 || holdings != own_holdings_) {
    own_holdings_ = std::move(holdings);
    own_published_unix_ms_ = std::max(now, own_heartbeat_unix_ms_ + 1);
  }
  own_heartbeat_unix_ms_ = std::max(now, own_heartbeat_unix_ms_ + 1);
  report.set_published_unix_ms(own_published_unix_ms_);
  report.set_heartbeat_unix_ms(own_heartbeat_unix_ms_);
  return report;
}

int64_t LocalityBoard::AgeMs(const Held& held, std::chrono::steady_clock::time_point now) {
  return held.report.age_ms() + Milliseconds(now - held.received);
}

std::vector<LocalityBoard::PeerHolding> LocalityBoard::HoldingsOf(std::string_view dataset) const {
  std::shared_ptr<const ClusterMap> members = cluster_->current();
  const auto now = std::chrono::steady_clock::now();
  std::vector<PeerHolding> holdings;
  MutexLock lock(&mutex_);
  for (const auto& [node_id, held] : reports_) {
    const Member* member = members->Find(node_id);
    if (member == nullptr || !member->up) continue;
    const int64_t age_ms = AgeMs(held, now);
    if (age_ms > options_.max_age.count()) continue;
    PeerHolding& peer =
        holdings.emplace_back(PeerHolding{node_id, held.report.group(), age_ms, std::nullopt});
    for (const v1::DatasetHolding& holding : held.report.holdings()) {
      if (holding.name() == dataset) peer.holding = holding;
    }
  }
  return holdings;
}

absl::StatusOr<v1::ExchangeLocalityResponse> LocalityBoard::Answer(
    const v1::ExchangeLocalityRequest& request) {
  if (request.own().node_id() != request.sender_id()) {
    return absl::InvalidArgumentError(absl::StrCat("locality exchange from '", request.sender_id(),
                                                   "' carries the report of node '",
                                                   request.own().node_id(), "'"));
  }
  GRANARY_RETURN_IF_ERROR(Adopt(request.own(), request.sender_id()));
  absl::flat_hash_map<std::string, const v1::LocalityDigest*> known;
  for (const v1::LocalityDigest& digest : request.known()) known[digest.node_id()] = &digest;
  v1::ExchangeLocalityResponse response;
  size_t bytes = 0;
  // Copies a report only when it is sent, and its holdings only when the
  // sender lacks them.
  auto add = [&](const v1::LocalityReport& report, int64_t age_ms) {
    if (age_ms > options_.max_age.count() || report.node_id() == request.sender_id()) return;
    auto it = known.find(report.node_id());
    const bool heartbeat_only =
        it != known.end() && it->second->published_unix_ms() >= report.published_unix_ms();
    if (heartbeat_only && (it->second->published_unix_ms() > report.published_unix_ms() ||
                           it->second->heartbeat_unix_ms() >= report.heartbeat_unix_ms())) {
      return;
    }
    v1::LocalityReport sent;
    if (heartbeat_only) {
      sent.set_node_id(report.node_id());
      sent.set_group(report.group());
      sent.set_published_unix_ms(report.published_unix_ms());
      sent.set_heartbeat_unix_ms(report.heartbeat_unix_ms());
      sent.set_heartbeat_only(true);
    } else {
      sent = report;
    }
    sent.set_age_ms(age_ms);
    const size_t size = sent.ByteSizeLong();
    if (bytes + size > kMaxAnswerBytes) return;
    bytes += size;
    *response.add_reports() = std::move(sent);
  };
  add(OwnReport(), 0);
  const auto now = std::chrono::steady_clock::now();
  MutexLock lock(&mutex_);
  for (const auto& [node_id, held] : reports_) add(held.report, AgeMs(held, now));
  return response;
}

absl::Status LocalityBoard::Adopt(const v1::LocalityReport& report, const std::string& from) {
  std::shared_ptr<const ClusterMap> members = cluster_->current();
  absl::Status valid = ValidateLocalityReport(report, NowUnixMs(), options_.max_holdings);
  if (valid.ok() && report.node_id() == cluster_->self().id) {
    valid = absl::InvalidArgumentError("a locality report of this node comes only from itself");
  } else if (valid.ok() && members->Find(report.node_id()) == nullptr) {
    valid = absl::InvalidArgumentError(
        absl::StrCat("locality report of node '", report.node_id(), "', not a listed member"));
  }
  if (!valid.ok()) {
    GRANARY_LOG(WARNING) << "audit: refused a locality report from node '" << from
                         << "': " << valid.message();
    return valid;
  }
  const auto now = std::chrono::steady_clock::now();
  MutexLock lock(&mutex_);
  auto it = reports_.find(report.node_id());
  const int64_t held_published = it == reports_.end() ? 0 : it->second.report.published_unix_ms();
  if (report.published_unix_ms() > held_published) {
    // A heartbeat of holdings this node never had tells it nothing to show.
    if (!report.heartbeat_only()) reports_.insert_or_assign(report.node_id(), Held{report, now});
  } else if (report.published_unix_ms() == held_published &&
             report.heartbeat_unix_ms() > it->second.report.heartbeat_unix_ms()) {
    it->second.report.set_heartbeat_unix_ms(report.heartbeat_unix_ms());
    it->second.report.set_age_ms(report.age_ms());
    it->second.received = now;
  }
  return absl::OkStatus();
}

absl::Status LocalityBoard::ExchangeWith(const Member& peer) {
  const auto deadline = std::chrono::system_clock::now() + kExchangeWait;
  GRANARY_ASSIGN_OR_RETURN(std::unique_ptr<v1::Granary::Stub> stub,
                           ConnectToPeerUnlessRefused(cluster_->clients(), peer, deadline));
  v1::ExchangeLocalityRequest request;
  request.set_sender_id(cluster_->self().id);
  *request.mutable_own() = OwnReport();
  grpc::ClientContext context;
  context.set_deadline(deadline);
  {
    MutexLock lock(&mutex_);
    if (stopping_) return absl::CancelledError("locality board is stopping");
    for (const auto& [node_id, held] : reports_) {
      v1::LocalityDigest* digest = request.add_known();
      digest->set_node_id(node_id);
      digest->set_published_unix_ms(held.report.published_unix_ms());
      digest->set_heartbeat_unix_ms(held.report.heartbeat_unix_ms());
    }
    call_ = &context;
  }
  v1::ExchangeLocalityResponse response;
  grpc::Status called = stub->ExchangeLocality(&context, request, &response);
  {
    MutexLock lock(&mutex_);
    call_ = nullptr;
  }
  GRANARY_RETURN_IF_ERROR(FromGrpcStatus(called));
  for (const v1::LocalityReport& report : response.reports()) {
    // A refused report is logged; the others still count.
    Adopt(report, peer.id).IgnoreError();
  }
  return absl::OkStatus();
}

void LocalityBoard::Run() {
  std::mt19937_64 random(std::random_device{}());
  while (true) {
    std::shared_ptr<const ClusterMap> members = cluster_->current();
    {
      MutexLock lock(&mutex_);
      absl::erase_if(reports_,
                     [&](const auto& held) { return members->Find(held.first) == nullptr; });
    }
    std::vector<Member> peers = cluster_->Peers();
    if (!peers.empty()) {
      const Member& peer = peers[random() % peers.size()];
      absl::Status exchanged = ExchangeWith(peer);
      if (!exchanged.ok()) {
        GRANARY_LOG(DEBUG) << "locality exchange with " << peer.id << ": " << exchanged;
      }
    }
    MutexLock lock(&mutex_);
    wake_.WaitUntil(&mutex_, std::chrono::steady_clock::now() + options_.period,
                    [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) { return stopping_; });
    if (stopping_) return;
  }
}

}  // namespace granary
