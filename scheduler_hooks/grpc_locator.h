// A Locator (scheduler_hooks/locator.h) that asks one granaryd's Locate RPC,
// which answers for the whole cluster. Each call has its own deadline, so a
// hung server costs the scheduler at most that long.
//
// Thread-safety: the returned Locator may be called concurrently.
#ifndef GRANARY_SCHEDULER_HOOKS_GRPC_LOCATOR_H_
#define GRANARY_SCHEDULER_HOOKS_GRPC_LOCATOR_H_

#include <chrono>
#include <string_view>

#include "absl/status/statusor.h"
#include "scheduler_hooks/locator.h"

namespace granary::hooks {

// `address` as in common/net/server_address.h; `cluster_token` ("" for none) as in
// common/net/cluster_token.h. INVALID_ARGUMENT for a malformed address; connecting
// is lazy.
absl::StatusOr<Locator> MakeGrpcLocator(std::string_view address, std::string_view cluster_token,
                                        std::chrono::milliseconds deadline);

}  // namespace granary::hooks

#endif  // GRANARY_SCHEDULER_HOOKS_GRPC_LOCATOR_H_
