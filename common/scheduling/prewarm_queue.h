// PrewarmQueue warms datasets in the background for the hooks that learn where
// a job will read them: granary-csi when a pod that reads a dataset is placed
// on its node (the node's own group), the admission webhook when a pod is
// admitted (the groups it prefers for the pod). One thread asks a granaryd to
// prewarm each queued (dataset, group), as `granary prewarm` would, so the
// first epoch reads from NVMe. It never delays its caller: requests queue, a
// (dataset, group) already queued or warming is not queued again, and at most
// kMaxQueued wait (more are dropped with a log line). Failures are logged;
// reads still work, from the source.
//
// Thread-safety: Warm() may be called from any thread; the destructor
// cancels a prewarm under way and joins the thread.
#ifndef GRANARY_COMMON_SCHEDULING_PREWARM_QUEUE_H_
#define GRANARY_COMMON_SCHEDULING_PREWARM_QUEUE_H_

#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "common/base/mutex.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "proto/granary.grpc.pb.h"

namespace granary {

class PrewarmQueue {
 public:
  static constexpr size_t kMaxQueued = 64;

  // `occasion` ends the log lines ("on placement").
  PrewarmQueue(std::shared_ptr<grpc::Channel> granaryd, std::string occasion);
  ~PrewarmQueue();
  PrewarmQueue(const PrewarmQueue&) = delete;
  PrewarmQueue& operator=(const PrewarmQueue&) = delete;

  // Warms `dataset` onto cache group `group` ("": the granaryd's own group).
  void Warm(const std::string& dataset, const std::string& group = "");

 private:
  using Target = std::pair<std::string, std::string>;  // Dataset, group.

  void Run();
  void Prewarm(const Target& target);

  std::unique_ptr<v1::Granary::Stub> stub_;
  const std::string occasion_;
  Mutex mutex_;
  CondVar wake_;  // Queued, or stopping.
  std::deque<Target> queue_ ABSL_GUARDED_BY(mutex_);
  // Queued or warming.
  absl::flat_hash_set<Target> pending_ ABSL_GUARDED_BY(mutex_);
  grpc::ClientContext* running_ ABSL_GUARDED_BY(mutex_) = nullptr;
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  std::thread thread_;
};

}  // namespace granary

#endif  // GRANARY_COMMON_SCHEDULING_PREWARM_QUEUE_H_
