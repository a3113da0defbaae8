// Fuzzes the static members file parser, ParseMembersYaml: a running granaryd
// reloads that file whenever it changes, so a malformed one must be refused
// without harm to the server.
//
// Properties: a rejected file is INVALID_ARGUMENT and its message names the
// file; an accepted one lists at least one member, every member has an id, a
// HOST:PORT address, a group and a weight of 1-1000, and the list builds a
// cluster map whose owners of any chunk are distinct live members of the
// asked group.
#include <cstddef>
#include <cstdint>
#include <set>
#include <string_view>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "cache_server/config/config.h"
#include "cache_server/config/members_file.h"
#include "common/base/absl_compat.h"
#include "common/cluster/cluster_map.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace granary;
  constexpr std::string_view kOrigin = "/etc/granary/members.yaml";
  std::string_view yaml(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<std::vector<Member>> members = ParseMembersYaml(yaml, kOrigin);
  if (!members.ok()) {
    GRANARY_FUZZ_CHECK(absl::IsInvalidArgument(members.status()), members.status().ToString());
    GRANARY_FUZZ_CHECK(absl::StartsWith(members.status().message(), AsAbsl(kOrigin)),
                       members.status().ToString());
    return 0;
  }
  GRANARY_FUZZ_CHECK(!members->empty(), "accepted an empty member list");
  for (const Member& member : *members) {
    GRANARY_FUZZ_CHECK(!member.id.empty() && !member.group.empty(), member.address);
    GRANARY_FUZZ_CHECK(ValidateHostPort("address", member.address).ok(), member.address);
    GRANARY_FUZZ_CHECK(member.weight >= 1 && member.weight <= 1000, member.id);
  }
  absl::StatusOr<std::shared_ptr<const ClusterMap>> map = ClusterMap::Build(*members);
  GRANARY_FUZZ_CHECK(map.ok(), map.status().ToString());
  for (const std::string& group : (*map)->groups()) {
    for (uint32_t chunk = 0; chunk < 4; ++chunk) {
      std::set<std::string> seen;
      for (const Member* owner : (*map)->Owners(ChunkKey{1, 2, chunk}, group, 3)) {
        GRANARY_FUZZ_CHECK(owner->group == group && owner->up, owner->id);
        GRANARY_FUZZ_CHECK(seen.insert(owner->id).second, absl::StrCat(owner->id, " twice"));
      }
    }
  }
  return 0;
}
