// MemberWatcher keeps a reader's view of the cluster current. It asks the
// reader's own granaryd for its member list (GetMembers) when constructed,
// then every `interval`, and sooner when RefreshSoon() asks (at most once per
// `min_refresh_interval`, so a burst of failing reads costs one call). Each
// view that differs from the previous one goes to the listener.
//
// The reader's cache group is the group of the answering server (`self_id`):
// traffic stays under the reader's own switch.
//
// Until the server has answered once (an older granaryd answers UNIMPLEMENTED;
// a server may be down or still starting), the view is the local server alone,
// so every chunk is still read through it; the watcher keeps asking in the
// background and logs the failure once. After a good answer, a failed refresh
// keeps the last view: a server that cannot send its list right now is no
// reason to forget the cluster.
//
// Thread-safety: the constructor hands the first view to the listener before
// returning; later views come from the watcher's own thread, never
// concurrently with each other. RefreshSoon() may be called from any thread.
// The destructor stops the thread (waiting for a GetMembers in flight) and no
// listener call follows it.
#ifndef GRANARY_CLIENT_MEMBER_WATCHER_H_
#define GRANARY_CLIENT_MEMBER_WATCHER_H_

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "client/dataset_client.h"
#include "common/base/mutex.h"
#include "common/cluster/cluster_map.h"
#include "proto/granary.pb.h"

namespace granary {

// The cluster as one reader sees it.
struct MemberView {
  std::string self_id;  // The reader's local server.
  std::string group;    // Its cache group: where the reader's chunks live.
  std::shared_ptr<const ClusterMap> members;

  // "cache group 'rack-a' of 3 member(s); this node is 'gpu-001'", for logs.
  std::string ToString() const;
};

// The view in a GetMembers answer. INVALID_ARGUMENT when the list does not
// name the answering server or does not make a valid ClusterMap.
absl::StatusOr<MemberView> ViewFromMembers(const v1::GetMembersResponse& response);

// The view of a reader that knows nothing but its local server at `address`:
// one member, named by its address, in the default group.
MemberView LocalOnlyView(const std::string& address);

class MemberWatcher {
 public:
  struct Options {
    std::chrono::milliseconds interval{5000};
    std::chrono::milliseconds min_refresh_interval{1000};
  };
  using Listener = std::function<void(const MemberView&)>;

  // `server` is the reader's local granaryd and must outlive the watcher.
  MemberWatcher(const DatasetClient* server, Options options, Listener listener);
  ~MemberWatcher();
  MemberWatcher(const MemberWatcher&) = delete;
  MemberWatcher& operator=(const MemberWatcher&) = delete;

  // Asks the server again soon, e.g. because no owner of a chunk answered.
  void RefreshSoon();

 private:
  // Asks the server and hands a changed view to the listener.
  void Refresh();
  void Run();

  const DatasetClient* const server_;
  const Options options_;
  const Listener listener_;

  // Touched by the constructor, then only by the watcher's thread.
  MemberView last_;
  bool answered_ = false;  // The server has sent a usable list at least once.
  bool failing_ = false;   // The latest refresh failed (logged once per streak).

  Mutex mutex_;
  CondVar wake_;
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  bool refresh_soon_ ABSL_GUARDED_BY(mutex_) = false;
  std::chrono::steady_clock::time_point last_refresh_ ABSL_GUARDED_BY(mutex_);
  std::thread thread_;
};

}  // namespace granary

#endif  // GRANARY_CLIENT_MEMBER_WATCHER_H_
