// Locator is how every scheduler hook asks where a dataset is cached: a
// function from a dataset's name to its locality across the cluster
// (v1::LocateResponse, as granaryd's Locate answers it). The extender takes
// one; grpc_locator.h makes one that asks a granaryd, locate_cache.h one
// that reuses another's answers.
//
// Thread-safety: as the function it holds; those made here may be called
// concurrently.
#ifndef GRANARY_SCHEDULER_HOOKS_LOCATOR_H_
#define GRANARY_SCHEDULER_HOOKS_LOCATOR_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "proto/granary.pb.h"

namespace granary::hooks {

// NOT_FOUND for a dataset the cluster does not know, any other error when
// the cluster cannot answer.
using Locator = std::function<absl::StatusOr<v1::LocateResponse>(const std::string& dataset)>;

}  // namespace granary::hooks

#endif  // GRANARY_SCHEDULER_HOOKS_LOCATOR_H_
