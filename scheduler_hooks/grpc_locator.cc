#include "scheduler_hooks/grpc_locator.h"

#include <memory>
#include <string>

#include "common/base/status.h"
#include "common/net/server_address.h"
#include "grpcpp/grpcpp.h"
#include "proto/granary.grpc.pb.h"

namespace granary::hooks {

absl::StatusOr<Locator> MakeGrpcLocator(std::string_view address, std::string_view cluster_token,
                                        std::chrono::milliseconds deadline) {
  GRANARY_ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel,
                           MakeChannel(address, cluster_token));
  std::shared_ptr<v1::Granary::Stub> stub = v1::Granary::NewStub(channel);
  return [stub, deadline](const std::string& dataset) -> absl::StatusOr<v1::LocateResponse> {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + deadline);
    v1::LocateRequest request;
    request.set_name(dataset);
    v1::LocateResponse response;
    GRANARY_RETURN_IF_ERROR(FromGrpcStatus(stub->Locate(&context, request, &response)));
    return response;
  };
}

}  // namespace granary::hooks
