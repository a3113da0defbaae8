#include "cache_server/holds/hold_table.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/logging.h"
#include "common/base/printable.h"
#include "common/base/size.h"
#include "common/base/status.h"

namespace granary {

HoldTable::HoldTable(DatasetRegistry* registry, VersionActivity* activity, ClusterView* cluster,
                     Options options)
    : registry_(registry),
      activity_(activity),
      cluster_(cluster),
      options_(std::move(options)),
      sweeper_(std::make_unique<PeriodicThread>(kSweepPeriod, kSweepPeriod,
                                                [this] { ExpireLapsed(); })) {}

HoldTable::~HoldTable() { sweeper_.reset(); }

absl::Status HoldTable::Place(const std::string& holder, const std::vector<std::string>& datasets,
                              std::chrono::milliseconds lease) {
  if (holder.empty() || holder.size() > kMaxHolderLength ||
      std::any_of(holder.begin(), holder.end(),
                  [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; })) {
    return absl::InvalidArgumentError(absl::StrCat("holder '", Printable(holder), "' is not 1 to ",
                                                   kMaxHolderLength, " printable characters"));
  }
  if (datasets.empty() || datasets.size() > kMaxDatasets) {
    return absl::InvalidArgumentError(absl::StrCat("a hold for ", holder, " names ",
                                                   datasets.size(), " datasets: 1 to ",
                                                   kMaxDatasets, " expected"));
  }
  if (lease < kMinLease || lease > kMaxLease) {
    return absl::InvalidArgumentError(
        absl::StrCat("hold lease ", lease.count(), " ms is not in 1 s - 1 day"));
  }
  std::vector<Held> wanted;
  for (const std::string& dataset : datasets) {
    GRANARY_ASSIGN_OR_RETURN(Held held, Resolve(dataset));
    if (std::none_of(wanted.begin(), wanted.end(),
                     [&held](const Held& other) { return other.version == held.version; })) {
      wanted.push_back(std::move(held));
    }
  }
  std::vector<Held> replaced;
  {
    MutexLock lock(&mu_);
    if (!holders_.contains(holder) && holders_.size() >= kMaxHolders) {
      return absl::ResourceExhaustedError(absl::StrCat("node ", cluster_->self().id, " holds for ",
                                                       kMaxHolders, " holders already; ", holder,
                                                       " reads through"));
    }
    std::map<uint64_t, uint64_t> held = HeldByOthersLocked(holder);
    for (const Held& version : wanted) held.emplace(version.version, version.bytes);
    uint64_t total = 0;
    for (const auto& [version, bytes] : held) total += bytes;
    if (total > options_.share_bytes) {
      std::vector<std::string> fillers;
      for (const auto& [other, holding] : holders_) {
        if (other == holder) continue;
        for (const Held& version : holding.versions) {
          fillers.push_back(absl::StrCat("'", version.dataset, "' for ", other, " (",
                                         FormatSize(version.bytes), ")"));
        }
      }
      std::vector<std::string> names;
      for (const Held& version : wanted) names.push_back(absl::StrCat("'", version.dataset, "'"));
      return absl::ResourceExhaustedError(absl::StrCat(
          "node ", cluster_->self().id, " refuses to hold ", absl::StrJoin(names, ", "), " for ",
          holder, ": holds would take ", FormatSize(total), ", past ", options_.share_text,
          "; held: ", fillers.empty() ? "nothing" : absl::StrJoin(fillers, ", ")));
    }
    for (const Held& version : wanted) activity_->Hold(version.version);
    Holding& holding = holders_[holder];
    replaced = std::move(holding.versions);
    holding.versions = std::move(wanted);
    holding.expires = Clock::now() + lease;
  }
  ReleaseVersions(replaced);
  return absl::OkStatus();
}

size_t HoldTable::Release(const std::string& holder) {
  std::vector<Held> released;
  {
    MutexLock lock(&mu_);
    auto it = holders_.find(holder);
    if (it == holders_.end()) return 0;
    released = std::move(it->second.versions);
    holders_.erase(it);
  }
  ReleaseVersions(released);
  return released.size();
}

v1::NodeHolds HoldTable::List() const {
  v1::NodeHolds node;
  node.set_node_id(cluster_->self().id);
  node.set_group(cluster_->self().group);
  node.set_share_bytes(options_.share_bytes);
  const Clock::time_point now = Clock::now();
  MutexLock lock(&mu_);
  node.set_held_bytes(TotalsLocked().held_bytes);
  for (const auto& [holder, holding] : holders_) {
    for (const Held& version : holding.versions) {
      v1::Hold* hold = node.add_holds();
      hold->set_holder(holder);
      hold->set_dataset(version.dataset);
      hold->set_version(version.version);
      hold->set_bytes(version.bytes);
      hold->set_expires_in_ms(
          std::chrono::duration_cast<std::chrono::milliseconds>(holding.expires - now).count());
    }
  }
  return node;
}

HoldTotals HoldTable::Totals() const {
  MutexLock lock(&mu_);
  return TotalsLocked();
}

HoldTotals HoldTable::TotalsLocked() const {
  HoldTotals totals;
  totals.share_bytes = options_.share_bytes;
  for (const auto& [version, bytes] : HeldByOthersLocked("")) totals.held_bytes += bytes;
  for (const auto& [holder, holding] : holders_) totals.holds += holding.versions.size();
  return totals;
}

absl::StatusOr<HoldTable::Held> HoldTable::Resolve(const std::string& dataset) const {
  GRANARY_ASSIGN_OR_RETURN(v1::DatasetInfo info, registry_->Get(dataset));
  const uint64_t members =
      std::max<uint64_t>(1, cluster_->GroupMembers(cluster_->self().group).size());
  const uint64_t copies = std::min<uint64_t>(std::max<uint32_t>(info.replicas(), 1), members);
  // Rounded up: a share is never under what the node will hold.
  const uint64_t bytes = (info.total_bytes() * copies + members - 1) / members;
  return Held{.dataset = dataset, .version = info.version(), .bytes = bytes};
}

std::map<uint64_t, uint64_t> HoldTable::HeldByOthersLocked(const std::string& except) const {
  std::map<uint64_t, uint64_t> held;
  for (const auto& [holder, holding] : holders_) {
    if (holder == except) continue;
    for (const Held& version : holding.versions) held.emplace(version.version, version.bytes);
  }
  return held;
}

void HoldTable::ReleaseVersions(const std::vector<Held>& versions) {
  for (const Held& version : versions) activity_->Release(version.version);
}

void HoldTable::ExpireLapsed() {
  std::vector<Held> lapsed;
  {
    MutexLock lock(&mu_);
    const Clock::time_point now = Clock::now();
    for (auto it = holders_.begin(); it != holders_.end();) {
      if (it->second.expires > now) {
        ++it;
        continue;
      }
      GRANARY_LOG(INFO) << "holds: the lease of " << it->first << " lapsed; released "
                        << it->second.versions.size() << " dataset versions";
      for (Held& version : it->second.versions) lapsed.push_back(std::move(version));
      it = holders_.erase(it);
    }
  }
  ReleaseVersions(lapsed);
}

}  // namespace granary
