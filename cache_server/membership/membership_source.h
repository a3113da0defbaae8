// A MembershipSource tells granaryd who is in the cluster: the static members
// file (StaticMembership) or etcd leases (EtcdMembership). Each calls its
// listener with the whole current member list whenever it changes, from its
// own thread; the listener builds a new ClusterMap and swaps it in.
//
// Thread-safety: implementations are internally synchronised; the listener is
// never called concurrently with itself.
#ifndef GRANARY_CACHE_SERVER_MEMBERSHIP_MEMBERSHIP_SOURCE_H_
#define GRANARY_CACHE_SERVER_MEMBERSHIP_MEMBERSHIP_SOURCE_H_

#include <functional>
#include <vector>

#include "common/cluster/cluster_map.h"

namespace granary {

using MembershipListener = std::function<void(std::vector<Member>)>;

class MembershipSource {
 public:
  virtual ~MembershipSource() = default;
};

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_MEMBERSHIP_MEMBERSHIP_SOURCE_H_
