// MemberClients keeps connections to cluster members for the processes that
// talk to many of them (readers routing chunks, granaryd calling its peers):
// kConnectionsPerMember gRPC channels per member, each with its own
// connection and a DatasetClient over it, made on first use and kept for the
// life of the pool. Reader() hands them out in turn, so concurrent chunk
// reads from one member are spread over several TCP connections, which one
// connection's window and single stream cannot keep full. The local node is
// reached over its Unix socket instead of its TCP address.
//
// It also remembers which members failed recently: MarkSuspect() makes a
// member suspect for `suspect_period`, so callers can ask it last (or not at
// all) and a dead node costs one deadline, not one per call.
//
// Thread-safety: all methods may be called concurrently. Pointers and
// channels handed out stay valid while the pool lives.
#ifndef GRANARY_CLIENT_MEMBER_CLIENTS_H_
#define GRANARY_CLIENT_MEMBER_CLIENTS_H_

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "client/dataset_client.h"
#include "common/base/mutex.h"
#include "common/cluster/cluster_map.h"

namespace grpc {
class Channel;
}  // namespace grpc

namespace granary {

class MemberClients {
 public:
  static constexpr int kConnectionsPerMember = 4;

  struct Options {
    std::string local_node_id;  // Reached at local_address instead of its TCP address.
    std::string local_address;  // "unix:PATH" of the local granaryd.
    std::chrono::milliseconds suspect_period{3000};
    DatasetClient::Options client;  // Deadlines and the cluster token.
  };

  explicit MemberClients(Options options);
  ~MemberClients();

  const Options& options() const { return options_; }

  // A reader of `member`, the next of its connections in turn;
  // INVALID_ARGUMENT for a malformed address.
  absl::StatusOr<const DatasetClient*> Reader(const Member& member);
  // A channel of `member`, for calls beyond reading (status, prewarm).
  absl::StatusOr<std::shared_ptr<grpc::Channel>> Channel(const Member& member);

  bool IsSuspect(const std::string& member_id);
  void MarkSuspect(const std::string& member_id);

 private:
  struct Connections {
    std::vector<std::shared_ptr<grpc::Channel>> channels;
    std::vector<std::unique_ptr<DatasetClient>> readers;  // One per channel.
    std::atomic<uint32_t> next_reader{0};
  };
  absl::StatusOr<Connections*> ConnectionsTo(const Member& member);

  const Options options_;
  Mutex mutex_;
  // By address; never erased, so pointers into it stay valid.
  absl::flat_hash_map<std::string, std::unique_ptr<Connections>> connections_
      ABSL_GUARDED_BY(mutex_);
  absl::flat_hash_map<std::string, std::chrono::steady_clock::time_point> suspect_until_
      ABSL_GUARDED_BY(mutex_);
};

}  // namespace granary

#endif  // GRANARY_CLIENT_MEMBER_CLIENTS_H_
