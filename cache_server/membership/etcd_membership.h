// EtcdMembership is dynamic membership through etcd v3, the store a production
// cluster already runs. The node registers itself as
//   <prefix><node id> = {"address": "...", "group": "...", "weight": N}
// under a lease that it keeps alive; if the node dies, the lease expires and
// the key disappears. Every node watches the prefix and reports the member
// list to its listener on each change.
//
// Failure handling: a broken keep-alive or watch stream is reopened with
// backoff; a lease found expired (etcd restarted, the node was partitioned
// for longer than the TTL) is granted anew and the key put again; after a
// broken watch the list is re-read whole, so no change is missed. Entries that
// do not parse are logged and left out, never fatal.
//
// Thread-safety: the constructor starts two threads (keep-alive and watch);
// the destructor stops them and revokes the lease so the node leaves at once.
#ifndef GRANARY_CACHE_SERVER_MEMBERSHIP_ETCD_MEMBERSHIP_H_
#define GRANARY_CACHE_SERVER_MEMBERSHIP_ETCD_MEMBERSHIP_H_

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "cache_server/membership/membership_source.h"
#include "common/base/mutex.h"

namespace etcdserverpb {
class KeyValue;
}  // namespace etcdserverpb

namespace grpc {
class Channel;
class ClientContext;
}  // namespace grpc

namespace granary {

class EtcdMembership : public MembershipSource {
 public:
  struct Options {
    // "http://HOST:PORT" or "HOST:PORT" of an etcd client endpoint.
    std::string endpoint;
    Member self;
    std::chrono::seconds lease_ttl{10};
    std::string prefix = "/granary/members/";
  };

  // Registers `self` and reads the current members before returning, so the
  // first listener call has happened by then. Fails with INVALID_ARGUMENT for a
  // malformed endpoint and UNAVAILABLE naming the endpoint when etcd does not
  // answer.
  static absl::StatusOr<std::unique_ptr<EtcdMembership>> Start(Options options,
                                                               MembershipListener listener);
  ~EtcdMembership() override;

 private:
  EtcdMembership(Options options, MembershipListener listener,
                 std::shared_ptr<grpc::Channel> channel);

  absl::Status Register();
  void KeepAliveLoop();
  void WatchLoop(int64_t start_revision);
  // Reads every member under the prefix, reports them, and returns the
  // revision to watch from.
  absl::StatusOr<int64_t> ReadAll();
  // Records the member of an etcd key-value pair in `members`; a value that
  // does not decode is logged and its node left out.
  void Put(const etcdserverpb::KeyValue& kv, std::map<std::string, Member>* members) const;
  void Report();
  // Waits up to `duration` or until stopping; true if stopping.
  bool SleepUnlessStopping(std::chrono::milliseconds duration);
  // Registers `context` as the one to cancel on stop; false if stopping.
  bool Track(grpc::ClientContext* context);
  void Untrack(grpc::ClientContext* context);

  const Options options_;
  const MembershipListener listener_;
  const std::shared_ptr<grpc::Channel> channel_;

  Mutex mutex_;
  CondVar wake_;
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  std::vector<grpc::ClientContext*> live_calls_ ABSL_GUARDED_BY(mutex_);
  int64_t lease_id_ ABSL_GUARDED_BY(mutex_) = 0;

  Mutex members_mutex_;  // Also serialises Report().
  std::map<std::string, Member> members_ ABSL_GUARDED_BY(members_mutex_);  // By node id.

  std::thread keep_alive_thread_;
  std::thread watch_thread_;
};

// The etcd value of a member, and back. The node id is the key's suffix.
std::string EncodeMemberValue(const Member& member);
absl::StatusOr<Member> DecodeMemberValue(std::string_view node_id, std::string_view value);

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_MEMBERSHIP_ETCD_MEMBERSHIP_H_
