#include "cache_server/access/connection_budget.h"

#include "absl/strings/str_cat.h"

namespace granary {

std::string HostOf(std::string_view tcp_address) {
  return std::string(tcp_address.substr(0, tcp_address.rfind(':')));
}

ConnectionBudget::Slot::~Slot() {
  if (budget_ != nullptr) budget_->GiveBack(host_);
}

absl::StatusOr<ConnectionBudget::Slot> ConnectionBudget::Take(const std::string& host) {
  MutexLock lock(&mutex_);
  if (overall_ >= limits_.overall) {
    return absl::ResourceExhaustedError(
        absl::StrCat("granaryd holds ", overall_, " ", what_, ", its limit (", overall_name_, ")"));
  }
  auto counted = per_host_.find(host);
  const uint32_t held_by_host = counted == per_host_.end() ? 0 : counted->second;
  if (held_by_host >= limits_.per_host) {
    return absl::ResourceExhaustedError(absl::StrCat(host, " holds ", held_by_host, " ", what_,
                                                     ", the limit (", per_host_name_, ")"));
  }
  ++per_host_[host];
  ++overall_;
  return Slot(this, host);
}

uint32_t ConnectionBudget::held() const {
  MutexLock lock(&mutex_);
  return overall_;
}

void ConnectionBudget::GiveBack(const std::string& host) {
  MutexLock lock(&mutex_);
  --overall_;
  auto counted = per_host_.find(host);
  if (--counted->second == 0) per_host_.erase(counted);
}

}  // namespace granary
