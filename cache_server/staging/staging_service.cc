#include "cache_server/staging/staging_service.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cache_server/access/call_authorization.h"
#include "common/base/printable.h"
#include "common/base/status.h"

namespace granary {
namespace {

// The answer of a change: the stage-in, or the error as a gRPC status.
grpc::Status Answer(const absl::StatusOr<v1::StageIn>& stage_in, v1::StageIn* response) {
  if (!stage_in.ok()) return ToGrpcStatus(stage_in.status());
  *response = *stage_in;
  return grpc::Status::OK;
}

}  // namespace

StagingService::StagingService(StageIns* stage_ins, HoldTable* holds, ClusterHolds* cluster_holds,
                               RequestAuthenticator* authenticator, const AccessPolicy* policy)
    : stage_ins_(stage_ins),
      holds_(holds),
      cluster_holds_(cluster_holds),
      authenticator_(authenticator),
      policy_(policy) {}

grpc::Status StagingService::StartStageIn(grpc::ServerContext* context,
                                          const v1::StartStageInRequest* request,
                                          v1::StageIn* response) {
  const std::string change =
      absl::StrCat("StartStageIn of job '", Printable(request->job_id()), "' for ",
                   Printable(absl::StrJoin(request->datasets(), ",")));
  absl::StatusOr<Caller> caller = AuthorizeCall(*authenticator_, *policy_, *context, "StartStageIn",
                                                AccessPolicy::Action::kAdminister, change);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  absl::StatusOr<v1::StageIn> started = stage_ins_->Start(*request);
  Audit(*caller, change, started.status());
  return Answer(started, response);
}

grpc::Status StagingService::TopUpStageIn(grpc::ServerContext* context,
                                          const v1::TopUpStageInRequest* request,
                                          v1::StageIn* response) {
  const std::string change = absl::StrCat("TopUpStageIn of job '", Printable(request->job_id()),
                                          "' on ", Printable(absl::StrJoin(request->nodes(), ",")));
  absl::StatusOr<Caller> caller = AuthorizeCall(*authenticator_, *policy_, *context, "TopUpStageIn",
                                                AccessPolicy::Action::kAdminister, change);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  absl::StatusOr<v1::StageIn> topped =
      stage_ins_->TopUp(*request, [context] { return context->IsCancelled(); });
  Audit(*caller, change, topped.status());
  return Answer(topped, response);
}

grpc::Status StagingService::EndStageIn(grpc::ServerContext* context,
                                        const v1::EndStageInRequest* request,
                                        v1::StageIn* response) {
  const std::string change = absl::StrCat("EndStageIn of job '", Printable(request->job_id()), "'");
  absl::StatusOr<Caller> caller = AuthorizeCall(*authenticator_, *policy_, *context, "EndStageIn",
                                                AccessPolicy::Action::kAdminister, change);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  absl::StatusOr<v1::StageIn> ended = stage_ins_->End(request->job_id());
  Audit(*caller, change, ended.status());
  return Answer(ended, response);
}

grpc::Status StagingService::ListStageIns(grpc::ServerContext* context,
                                          const v1::ListStageInsRequest*,
                                          v1::ListStageInsResponse* response) {
  absl::StatusOr<Caller> caller = AuthorizeCall(*authenticator_, *policy_, *context, "ListStageIns",
                                                AccessPolicy::Action::kDescribe);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  for (v1::StageIn& stage_in : stage_ins_->List()) {
    *response->add_stage_ins() = std::move(stage_in);
  }
  return grpc::Status::OK;
}

grpc::Status StagingService::PlaceHold(grpc::ServerContext* context,
                                       const v1::PlaceHoldRequest* request,
                                       v1::PlaceHoldResponse*) {
  const std::string change = absl::StrCat("PlaceHold for '", Printable(request->holder()), "' of ",
                                          Printable(absl::StrJoin(request->datasets(), ",")));
  absl::StatusOr<Caller> caller = AuthorizeCall(*authenticator_, *policy_, *context, "PlaceHold",
                                                AccessPolicy::Action::kAdminister, change);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  absl::Status placed =
      holds_->Place(request->holder(), {request->datasets().begin(), request->datasets().end()},
                    std::chrono::milliseconds(request->lease_ms()));
  Audit(*caller, change, placed);
  return ToGrpcStatus(placed);
}

grpc::Status StagingService::ReleaseHold(grpc::ServerContext* context,
                                         const v1::ReleaseHoldRequest* request,
                                         v1::ReleaseHoldResponse* response) {
  const std::string change = absl::StrCat("ReleaseHold for '", Printable(request->holder()), "'");
  absl::StatusOr<Caller> caller = AuthorizeCall(*authenticator_, *policy_, *context, "ReleaseHold",
                                                AccessPolicy::Action::kAdminister, change);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  response->set_released(static_cast<uint32_t>(holds_->Release(request->holder())));
  Audit(*caller, change, absl::OkStatus());
  return grpc::Status::OK;
}

grpc::Status StagingService::ListHolds(grpc::ServerContext* context,
                                       const v1::ListHoldsRequest* request,
                                       v1::ListHoldsResponse* response) {
  absl::StatusOr<Caller> caller = AuthorizeCall(*authenticator_, *policy_, *context, "ListHolds",
                                                AccessPolicy::Action::kDescribe);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  if (request->local_only()) {
    *response->add_nodes() = holds_->List();
  } else {
    *response = cluster_holds_->List();
  }
  return grpc::Status::OK;
}

}  // namespace granary
