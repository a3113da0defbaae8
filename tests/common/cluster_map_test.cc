#include "common/cluster/cluster_map.h"

#include <gtest/gtest.h>

#include <map>
#include <thread>

#include "absl/strings/str_cat.h"
#include "cache_server/config/members_file.h"

namespace granary {
namespace {

std::vector<Member> FourNodesTwoGroups() {
  return {
      {"a1", "127.0.0.1:7001", "rack-a", 1, true},
      {"a2", "127.0.0.1:7002", "rack-a", 2, true},
      {"b1", "127.0.0.1:7003", "rack-b", 1, true},
      {"b2", "127.0.0.1:7004", "rack-b", 1, true},
  };
}

TEST(ClusterMap, OwnersStayInsideTheAskedGroup) {
  auto map = ClusterMap::Build(FourNodesTwoGroups());
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_EQ((*map)->groups(), (std::vector<std::string>{"rack-a", "rack-b"}));
  std::map<std::string, int> load;
  for (uint32_t chunk = 0; chunk < 3000; ++chunk) {
    ChunkKey key{1, 2, chunk};
    auto owners = (*map)->Owners(key, "rack-a", 2);
    ASSERT_EQ(owners.size(), 2u);
    EXPECT_NE(owners[0], owners[1]);
    for (const Member* owner : owners) EXPECT_EQ(owner->group, "rack-a");
    ++load[owners[0]->id];
    EXPECT_EQ((*map)->Owners(key, "rack-b", 1)[0]->group, "rack-b");
  }
  // a2 weighs twice a1.
  EXPECT_NEAR(static_cast<double>(load["a2"]) / load["a1"], 2.0, 0.3);
  EXPECT_TRUE((*map)->Owners(ChunkKey{}, "no-such-rack", 1).empty());
}

TEST(ClusterMap, DownMembersOwnNothingAndOthersKeepTheirChunks) {
  auto members = FourNodesTwoGroups();
  auto before = ClusterMap::Build(members);
  members[1].up = false;  // a2
  auto after = ClusterMap::Build(members);
  ASSERT_TRUE(after.ok());
  EXPECT_NE((*after)->Find("a2"), nullptr);
  for (uint32_t chunk = 0; chunk < 2000; ++chunk) {
    ChunkKey key{1, 2, chunk};
    const Member* old_owner = (*before)->Owners(key, "rack-a", 1)[0];
    const Member* new_owner = (*after)->Owners(key, "rack-a", 1)[0];
    EXPECT_EQ(new_owner->id, "a1");
    if (old_owner->id == "a1") {
      EXPECT_EQ(new_owner->id, "a1");
    }
  }
  members[0].up = false;
  auto none = ClusterMap::Build(members);
  EXPECT_TRUE((*none)->Owners(ChunkKey{}, "rack-a", 1).empty());
  EXPECT_EQ((*none)->groups().size(), 2u);
}

// A cluster of many racks: Build() makes only the ready group's ring; the
// others are made at their first lookup, from many readers at once, and own
// what an eagerly used map says they own.
TEST(ClusterMap, RingsOfOtherGroupsAreBuiltWhenFirstAsked) {
  std::vector<Member> members;
  for (int i = 0; i < 400; ++i) {
    members.push_back({absl::StrCat("n", i), absl::StrCat("127.0.0.1:", 7000 + i),
                       absl::StrCat("rack-", i / 40), static_cast<uint32_t>(1 + i % 7), true});
  }
  auto reference = ClusterMap::Build(members, "rack-0");
  auto lazy = ClusterMap::Build(members, "rack-0");
  ASSERT_TRUE(reference.ok() && lazy.ok());
  std::vector<std::string> expected;
  for (uint32_t chunk = 0; chunk < 200; ++chunk) {
    for (const std::string& group : (*reference)->groups()) {
      expected.push_back((*reference)->Owners(ChunkKey{5, 6, chunk}, group, 1)[0]->id);
    }
  }
  std::vector<std::vector<std::string>> seen(4);
  std::vector<std::thread> readers;
  for (auto& owners : seen) {
    readers.emplace_back([&owners, &lazy] {
      for (uint32_t chunk = 0; chunk < 200; ++chunk) {
        for (const std::string& group : (*lazy)->groups()) {
          owners.push_back((*lazy)->Owners(ChunkKey{5, 6, chunk}, group, 1)[0]->id);
        }
      }
    });
  }
  for (std::thread& reader : readers) reader.join();
  for (const auto& owners : seen) EXPECT_EQ(owners, expected);
}

TEST(ClusterMap, RejectsAGroupLargerThanARingCanName) {
  std::vector<Member> members;
  for (size_t i = 0; i <= PlacementRing::kMaxNodes; ++i) {
    members.push_back({absl::StrCat("n", i), "h:1", "huge", 1, true});
  }
  auto map = ClusterMap::Build(members);
  ASSERT_FALSE(map.ok());
  EXPECT_NE(map.status().message().find("cache group 'huge' has 65537 live members"),
            std::string::npos)
      << map.status();
}

TEST(ClusterMap, RejectsBadMembers) {
  auto members = FourNodesTwoGroups();
  members.push_back(members[0]);
  auto duplicate = ClusterMap::Build(members);
  ASSERT_FALSE(duplicate.ok());
  EXPECT_NE(duplicate.status().message().find("'a1' is listed twice"), std::string::npos);
  EXPECT_FALSE(ClusterMap::Build({{"x", "", "g", 1, true}}).ok());
  EXPECT_FALSE(ClusterMap::Build({{"x", "h:1", "g", 0, true}}).ok());
}

TEST(MembersFile, ParsesMembersWithDefaults) {
  auto members = ParseMembersYaml(R"(
members:
  - id: gpu-001
    address: 10.0.1.1:7070
    group: rack-a
    weight: 2
  - id: gpu-002
    address: 10.0.1.2:7070
)",
                                  "members.yaml");
  ASSERT_TRUE(members.ok()) << members.status();
  ASSERT_EQ(members->size(), 2u);
  EXPECT_EQ((*members)[0], (Member{"gpu-001", "10.0.1.1:7070", "rack-a", 2, true}));
  EXPECT_EQ((*members)[1].group, "default");
  EXPECT_EQ((*members)[1].weight, 1u);
}

TEST(MembersFile, ErrorsNameTheFileTheMemberAndTheProblem) {
  struct Case {
    const char* yaml;
    const char* expected;
  };
  const Case cases[] = {
      {"members: []", "non-empty list"},
      {"nodes: []", "'members' list"},
      {"members:\n  - id: a\n", "'a' has no address"},
      {"members:\n  - address: h:1\n", "member 1: has no id"},
      {"members:\n  - {id: a, address: h:1, weight: 0}\n", "weight '0'"},
      {"members:\n  - {id: a, address: h:1, colour: red}\n", "unknown key 'colour'"},
      {"members:\n  - {id: a, address: nowhere}\n", "nowhere"},
      {"members:\n  - {id: a, address: h:1}\n  - {id: a, address: h:2}\n", "listed twice"},
      {"members: [\n", "line"},
  };
  for (const Case& c : cases) {
    auto members = ParseMembersYaml(c.yaml, "/etc/granary/members.yaml");
    ASSERT_FALSE(members.ok()) << c.yaml;
    EXPECT_EQ(members.status().code(), absl::StatusCode::kInvalidArgument) << c.yaml;
    std::string message(members.status().message());
    EXPECT_NE(message.find("/etc/granary/members.yaml"), std::string::npos) << message;
    EXPECT_NE(message.find(c.expected), std::string::npos) << message;
  }
  auto missing = ReadMembersFile("/nonexistent/members.yaml");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("/nonexistent/members.yaml"), std::string::npos);
}

}  // namespace
}  // namespace granary
