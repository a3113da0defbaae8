// PlacementPrewarmer warms a dataset's cache when a pod that reads it is
// placed on the node: granary-csi hands it each dataset it newly publishes,
// and one background thread asks the node's granaryd to prewarm it for the
// node's cache group (Prewarm with no group: the answering node's), as
// `granary prewarm` would, so the first epoch reads from NVMe. It never
// delays a publish: requests queue, a dataset already queued or warming is
// not queued again, and at most kMaxQueued wait (more are dropped with a log
// line). Failures are logged; reads still work, from the source.
//
// Thread-safety: Warm() may be called from any thread; the destructor
// cancels a prewarm under way and joins the thread.
#ifndef GRANARY_CSI_PLACEMENT_PREWARMER_H_
#define GRANARY_CSI_PLACEMENT_PREWARMER_H_

#include <deque>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "common/mutex.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "proto/granary.grpc.pb.h"

namespace granary::csi_driver {

class PlacementPrewarmer {
 public:
  static constexpr size_t kMaxQueued = 64;

  explicit PlacementPrewarmer(std::shared_ptr<grpc::Channel> granaryd);
  ~PlacementPrewarmer();
  PlacementPrewarmer(const PlacementPrewarmer&) = delete;
  PlacementPrewarmer& operator=(const PlacementPrewarmer&) = delete;

  void Warm(const std::string& dataset);

 private:
  void Run();
  void Prewarm(const std::string& dataset);

  std::unique_ptr<granary::v1::Granary::Stub> stub_;
  Mutex mutex_;
  CondVar wake_;  // Queued, or stopping.
  std::deque<std::string> queue_ ABSL_GUARDED_BY(mutex_);
  // Queued or warming.
  absl::flat_hash_set<std::string> pending_ ABSL_GUARDED_BY(mutex_);
  grpc::ClientContext* running_ ABSL_GUARDED_BY(mutex_) = nullptr;
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  std::thread thread_;
};

}  // namespace granary::csi_driver

#endif  // GRANARY_CSI_PLACEMENT_PREWARMER_H_
