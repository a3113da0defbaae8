#include "cache_server/prewarm/group_prewarm.h"

#include <algorithm>
#include <thread>

#include "absl/strings/str_cat.h"
#include "cache_server/cluster/peer_stub.h"
#include "common/base/logging.h"
#include "common/base/mutex.h"
#include "common/base/status.h"
#include "grpcpp/client_context.h"
#include "proto/granary.grpc.pb.h"

namespace granary {

GroupPrewarm::GroupPrewarm(ClusterView* cluster, v1::PrewarmRequest request,
                           std::chrono::milliseconds report_interval)
    : cluster_(cluster), request_(std::move(request)), report_interval_(report_interval) {}

absl::Status GroupPrewarm::Run(const std::function<bool(const v1::PrewarmProgress&)>& report,
                               const std::function<bool()>& cancelled) {
  std::vector<MemberShare> shares;
  for (Member& member : cluster_->GroupMembers(request_.group())) {
    shares.push_back({std::move(member), {}, absl::OkStatus(), false, {}, false});
  }
  if (shares.empty()) {
    return absl::NotFoundError(
        absl::StrCat("cache group '", request_.group(), "' has no live member to prewarm"));
  }
  GRANARY_LOG(INFO) << "prewarming dataset '" << request_.name() << "' on the " << shares.size()
                    << " members of group '" << request_.group() << "'";
  std::vector<std::string> unreachable;
  // Two rounds: everyone, then the survivors again with the failed named.
  for (int round = 0; round < 2; ++round) {
    if (!RunRound(&shares, unreachable, report, cancelled)) {
      return absl::CancelledError("prewarm cancelled");
    }
    auto failed = std::stable_partition(shares.begin(), shares.end(), [](const MemberShare& s) {
      return !ShouldTryAnotherOwner(s.status);
    });
    if (failed == shares.end() || failed == shares.begin() || round == 1) break;
    for (auto it = failed; it != shares.end(); ++it) {
      GRANARY_LOG(WARNING) << "prewarm: member " << it->member.id << " failed (" << it->status
                           << "); moving its share to the next owners";
      unreachable.push_back(it->member.id);
    }
    shares.erase(failed, shares.end());
    for (MemberShare& share : shares) share.done = false;
  }
  report(Sum(shares, true));
  return absl::OkStatus();
}

bool GroupPrewarm::RunRound(std::vector<MemberShare>* shares,
                            const std::vector<std::string>& unreachable,
                            const std::function<bool(const v1::PrewarmProgress&)>& report,
                            const std::function<bool()>& cancelled) {
  // Guards each share's progress, heard, silent, status and done, which the
  // share's thread writes and this one reads.
  Mutex mutex;
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::thread> threads;
  for (MemberShare& share : *shares) {
    share.heard = std::chrono::steady_clock::now();
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    grpc::ClientContext* context = contexts.back().get();
    threads.emplace_back([this, &share, &mutex, &unreachable, context] {
      absl::Status status;
      absl::StatusOr<std::unique_ptr<v1::Granary::Stub>> stub =
          ConnectToPeer(cluster_->clients(), share.member);
      if (stub.ok()) {
        v1::PrewarmRequest request = request_;
        request.set_owned_share_only(true);
        for (const std::string& id : unreachable) request.add_unreachable_members(id);
        auto reader = (*stub)->Prewarm(context, request);
        v1::PrewarmProgress progress;
        while (reader->Read(&progress)) {
          MutexLock lock(&mutex);
          share.progress = progress;
          share.heard = std::chrono::steady_clock::now();
        }
        status = FromGrpcStatus(reader->Finish());
      } else {
        status = stub.status();
      }
      MutexLock lock(&mutex);
      if (share.silent) {
        status = absl::DeadlineExceededError(
            absl::StrCat("sent no progress for ", kMemberSilence.count(), " s"));
      }
      share.status =
          status.ok()
              ? status
              : absl::Status(status.code(), absl::StrCat(share.member.id, ": ", status.message()));
      share.done = true;
    });
  }
  bool went_on = true;
  while (true) {
    bool all_done = true;
    v1::PrewarmProgress sum;
    {
      MutexLock lock(&mutex);
      const auto silent_since = std::chrono::steady_clock::now() - kMemberSilence;
      for (size_t i = 0; i < shares->size(); ++i) {
        MemberShare& share = (*shares)[i];
        all_done = all_done && share.done;
        if (!share.done && !share.silent && share.heard < silent_since) {
          share.silent = true;
          contexts[i]->TryCancel();
        }
      }
      sum = Sum(*shares, false);
    }
    if (all_done) break;
    if (went_on && (cancelled() || !report(sum))) {
      went_on = false;
      for (auto& context : contexts) context->TryCancel();
    }
    std::this_thread::sleep_for(report_interval_);
  }
  for (std::thread& thread : threads) thread.join();
  return went_on;
}

v1::PrewarmProgress GroupPrewarm::Sum(const std::vector<MemberShare>& shares, bool finished) const {
  v1::PrewarmProgress sum;
  double eta = 0;
  for (const MemberShare& share : shares) {
    const v1::PrewarmProgress& p = share.progress;
    sum.set_bytes_done(sum.bytes_done() + p.bytes_done());
    sum.set_bytes_total(sum.bytes_total() + p.bytes_total());
    sum.set_chunks_done(sum.chunks_done() + p.chunks_done());
    sum.set_chunks_total(sum.chunks_total() + p.chunks_total());
    sum.set_chunks_already_cached(sum.chunks_already_cached() + p.chunks_already_cached());
    sum.set_bytes_per_second(sum.bytes_per_second() + p.bytes_per_second());
    // The group is done when its slowest member is.
    eta = p.eta_seconds() < 0 || eta < 0 ? -1 : std::max(eta, p.eta_seconds());
    for (const v1::FileFailure& failure : p.failures()) *sum.add_failures() = failure;
    if (finished && !share.status.ok()) {
      v1::FileFailure* failure = sum.add_failures();
      failure->set_error(std::string(share.status.message()));
    }
  }
  sum.set_eta_seconds(finished ? 0 : eta);
  sum.set_finished(finished);
  sum.set_nodes(static_cast<uint32_t>(shares.size()));
  return sum;
}

}  // namespace granary
