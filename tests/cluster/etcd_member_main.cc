// Joins a cluster through etcd as one member and stays until killed: the
// membership tests SIGKILL it to show that a dead node's lease expires and it
// leaves every ring.
//   etcd_member ENDPOINT NODE_ID TTL_SECONDS
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "cache_server/membership/etcd_membership.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: etcd_member ENDPOINT NODE_ID TTL_SECONDS\n");
    return 2;
  }
  granary::EtcdMembership::Options options;
  options.endpoint = argv[1];
  options.self = {argv[2], "127.0.0.1:1", "default", 1, true};
  options.lease_ttl = std::chrono::seconds(std::atoi(argv[3]));
  auto membership = granary::EtcdMembership::Start(options, [](std::vector<granary::Member>) {});
  if (!membership.ok()) {
    std::fprintf(stderr, "etcd_member: %s\n", std::string(membership.status().message()).c_str());
    return 1;
  }
  std::printf("joined\n");
  std::fflush(stdout);
  while (true) ::pause();
}
