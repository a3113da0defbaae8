// ConnectToPeer: how granaryd reaches another node of its cluster before
// calling it (catalog exchanges, group prewarm; status and locate fan-outs
// through ConnectToPeerUnlessRefused).
// It waits until `deadline` (by default kPeerConnectWait from now) for the
// peer's channel to connect, which
// rides out gRPC's reconnect backoff (1 s, then longer) after an earlier
// failed call or a peer that joined moments ago, and then fails UNAVAILABLE
// naming the peer: a dead peer costs one bounded wait, in parallel with the
// other peers, never a call left hanging. Calls bound themselves past that:
// unary ones by their deadline, streams by their own check of progress.
//
// Thread-safety: thread-safe.
#ifndef GRANARY_CACHE_SERVER_CLUSTER_PEER_STUB_H_
#define GRANARY_CACHE_SERVER_CLUSTER_PEER_STUB_H_

#include <chrono>
#include <memory>

#include "absl/status/statusor.h"
#include "client/member_clients.h"
#include "common/cluster/cluster_map.h"
#include "proto/granary.grpc.pb.h"

namespace granary {

inline constexpr std::chrono::seconds kPeerConnectWait{3};

// A stub on a connected channel to `peer`.
absl::StatusOr<std::unique_ptr<v1::Granary::Stub>> ConnectToPeer(
    MemberClients& clients, const Member& peer,
    std::chrono::system_clock::time_point deadline = std::chrono::system_clock::now() +
                                                     kPeerConnectWait);

// As ConnectToPeer, but UNAVAILABLE as soon as a connection attempt fails
// (refused or reset: the channel is in TRANSIENT_FAILURE), for answers that
// report a peer as unreachable rather than wait for it (Status, Locate): a
// dead peer costs them one refused TCP connection, not the whole wait. A
// fresh attempt is made at once and, when the peer's host accepts a
// connection, has until `deadline`, so a peer that has just restarted is
// found up. A peer never reached before that does not answer a connection at
// all still costs up to `deadline`.
absl::StatusOr<std::unique_ptr<v1::Granary::Stub>> ConnectToPeerUnlessRefused(
    MemberClients& clients, const Member& peer, std::chrono::system_clock::time_point deadline);

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_CLUSTER_PEER_STUB_H_
