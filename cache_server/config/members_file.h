// The static members file: the cluster's nodes, given to every granaryd with
// --members FILE and reloaded when it changes. YAML:
//
//   members:
//     - id: gpu-001            # unique node id (granaryd --node-id)
//       address: 10.0.1.1:7070 # its TCP endpoint
//       group: rack-a          # cache group: the nodes under one switch
//       weight: 2              # relative capacity, 1-1000 (default 1)
//
// Errors are INVALID_ARGUMENT naming the origin (file path), the member's
// position and the bad key or value; the file is rejected whole, so a typo
// never shrinks the cluster.
//
// Thread-safety: pure functions.
#ifndef GRANARY_CACHE_SERVER_CONFIG_MEMBERS_FILE_H_
#define GRANARY_CACHE_SERVER_CONFIG_MEMBERS_FILE_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/cluster/cluster_map.h"

namespace granary {

absl::StatusOr<std::vector<Member>> ParseMembersYaml(std::string_view yaml,
                                                     std::string_view origin);

// Reads and parses `path`; NOT_FOUND or PERMISSION_DENIED naming it when it
// cannot be read.
absl::StatusOr<std::vector<Member>> ReadMembersFile(const std::string& path);

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_CONFIG_MEMBERS_FILE_H_
