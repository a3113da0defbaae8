// StagingService is the gRPC face of the stage-ins of one granaryd (package
// granary.v1, service Staging; proto/staging.proto). Starting, topping up and
// ending a stage-in are a scheduler's acts: they need an administrator (root
// or the admin group on the Unix socket) or a cluster member (the cluster
// token over TCP), as the Slurm hooks are, and each leaves an audit line.
// Anyone who may describe the cache may list stage-ins.
//
// Holds: PlaceHold and ReleaseHold act on this node's table alone (the
// stage-in that places them calls every member of its groups) and are a
// member's or an administrator's acts; ListHolds answers for every member
// unless asked for this node only.
//
// Thread-safety: gRPC calls handlers concurrently; all state is thread-safe.
#ifndef GRANARY_CACHE_SERVER_STAGING_STAGING_SERVICE_H_
#define GRANARY_CACHE_SERVER_STAGING_STAGING_SERVICE_H_

#include "cache_server/access/access_policy.h"
#include "cache_server/access/request_authenticator.h"
#include "cache_server/holds/cluster_holds.h"
#include "cache_server/holds/hold_table.h"
#include "cache_server/staging/stage_ins.h"
#include "proto/staging.grpc.pb.h"

namespace granary {

class StagingService final : public v1::Staging::Service {
 public:
  // The parts must outlive the service.
  StagingService(StageIns* stage_ins, HoldTable* holds, ClusterHolds* cluster_holds,
                 RequestAuthenticator* authenticator, const AccessPolicy* policy);

  grpc::Status StartStageIn(grpc::ServerContext* context, const v1::StartStageInRequest* request,
                            v1::StageIn* response) override;
  grpc::Status TopUpStageIn(grpc::ServerContext* context, const v1::TopUpStageInRequest* request,
                            v1::StageIn* response) override;
  grpc::Status EndStageIn(grpc::ServerContext* context, const v1::EndStageInRequest* request,
                          v1::StageIn* response) override;
  grpc::Status ListStageIns(grpc::ServerContext* context, const v1::ListStageInsRequest* request,
                            v1::ListStageInsResponse* response) override;
  grpc::Status PlaceHold(grpc::ServerContext* context, const v1::PlaceHoldRequest* request,
                         v1::PlaceHoldResponse* response) override;
  grpc::Status ReleaseHold(grpc::ServerContext* context, const v1::ReleaseHoldRequest* request,
                           v1::ReleaseHoldResponse* response) override;
  grpc::Status ListHolds(grpc::ServerContext* context, const v1::ListHoldsRequest* request,
                         v1::ListHoldsResponse* response) override;

 private:
  StageIns* const stage_ins_;
  HoldTable* const holds_;
  ClusterHolds* const cluster_holds_;
  RequestAuthenticator* const authenticator_;
  const AccessPolicy* const policy_;
};

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_STAGING_STAGING_SERVICE_H_
