#include "cache_server/prewarm/prewarm_limits.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace granary {

PrewarmLimits::Ticket::Ticket(Ticket&& other) noexcept
    : limits_(std::exchange(other.limits_, nullptr)),
      user_(other.user_),
      parallelism_(other.parallelism_),
      reserved_workers_(other.reserved_workers_) {}

PrewarmLimits::Ticket::~Ticket() {
  if (limits_ != nullptr) limits_->Release(*this);
}

PrewarmLimits::PrewarmLimits(Config config) : config_(config) {}

absl::StatusOr<PrewarmLimits::Ticket> PrewarmLimits::Admit(std::optional<uid_t> user,
                                                           unsigned parallelism, bool workers) {
  if (parallelism > kMaxParallelism) {
    return absl::InvalidArgumentError(absl::StrCat("prewarm parallelism ", parallelism,
                                                   " is over the maximum, ", kMaxParallelism));
  }
  unsigned wanted = parallelism == 0 ? config_.parallelism : parallelism;
  // A user may lower the parallelism, never raise it.
  if (user.has_value()) wanted = std::min(wanted, config_.parallelism);
  MutexLock lock(&mu_);
  if (prewarms_ >= kMaxPrewarms) {
    return absl::ResourceExhaustedError(
        absl::StrCat("granaryd already runs ", prewarms_,
                     " prewarms, the most it runs at once; try again once one has finished"));
  }
  if (user.has_value()) {
    auto own = per_user_.find(*user);
    if (own != per_user_.end() && own->second >= config_.max_prewarms_per_user) {
      return absl::ResourceExhaustedError(
          absl::StrCat("uid ", *user, " already runs ", own->second,
                       " prewarms, the most one user may run at once (max_prewarms_per_user: ",
                       config_.max_prewarms_per_user, "); try again once one has finished"));
    }
    if (users_prewarms_ >= config_.max_prewarms) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "users already run ", users_prewarms_, " prewarms, the most granaryd runs at once (",
          "max_prewarms: ", config_.max_prewarms, "); try again once one has finished"));
    }
  }
  unsigned reserved = 0;
  if (workers) {
    if (workers_ >= kMaxWorkers) {
      return absl::ResourceExhaustedError(
          absl::StrCat("granaryd's prewarms already run ", workers_,
                       " workers, the most it runs at once; try again once one has finished"));
    }
    wanted = std::min(wanted, kMaxWorkers - workers_);
    reserved = wanted;
  }
  ++prewarms_;
  workers_ += reserved;
  if (user.has_value()) {
    ++users_prewarms_;
    ++per_user_[*user];
  }
  return Ticket(this, user, wanted, reserved);
}

void PrewarmLimits::Release(const Ticket& ticket) {
  MutexLock lock(&mu_);
  --prewarms_;
  workers_ -= ticket.reserved_workers_;
  if (!ticket.user_.has_value()) return;
  --users_prewarms_;
  auto own = per_user_.find(*ticket.user_);
  if (--own->second == 0) per_user_.erase(own);
}

}  // namespace granary
