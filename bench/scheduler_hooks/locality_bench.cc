// A locality query for one dataset over a simulated cluster of 5,000 nodes in
// 125 cache groups of 40 (one per switch): the dataset (1 TiB) is fully cached
// in 3 groups, half in 10, and absent elsewhere. Each iteration decodes the
// Locate answer from its wire bytes, as the extender does, then scores.
//   BM_ScoreAllNodes         index the answer and score every node
//   BM_PrioritizeNodeNames   the extender's prioritize on a nodeCacheCapable
//                            request (Pod + 5,000 NodeNames), reply encoded
//   BM_PrioritizeNodeList    the same with a full v1.NodeList of 5,000 nodes
//   BM_FilterRequired        filter for a pod requiring locality (NodeNames)
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "proto/granary.pb.h"
#include "scheduler_hooks/extender.h"
#include "scheduler_hooks/locality.h"

namespace {

namespace v1 = granary::v1;

using nlohmann::json;

constexpr int kNodes = 5000;
constexpr int kNodesPerGroup = 40;
constexpr uint64_t kDatasetBytes = uint64_t{1} << 40;

std::string NodeName(int i) { return absl::StrCat("gpu-node-", i); }

// The wire bytes of the cluster's Locate answer.
const std::string& SimulatedLocateBytes() {
  static const std::string* bytes = [] {
    v1::LocateResponse locate;
    locate.set_name("imagenet");
    locate.set_version(0x1234abcd);
    locate.set_total_bytes(kDatasetBytes);
    const int groups = kNodes / kNodesPerGroup;
    for (int g = 0; g < groups; ++g) {
      double fraction = g < 3 ? 1.0 : g < 13 ? 0.5 : 0.0;
      uint64_t group_bytes = static_cast<uint64_t>(fraction * kDatasetBytes);
      v1::GroupLocality* group = locate.add_groups();
      group->set_group(absl::StrCat("rack-", g));
      group->set_cached_bytes(group_bytes);
      group->set_fraction(fraction);
      for (int n = 0; n < kNodesPerGroup; ++n) {
        v1::NodeLocality* node = locate.add_nodes();
        node->set_node_id(NodeName(g * kNodesPerGroup + n));
        node->set_group(group->group());
        node->set_cached_bytes(group_bytes / kNodesPerGroup);
        node->set_node_fraction(fraction / kNodesPerGroup);
        node->set_group_fraction(fraction);
      }
    }
    return new std::string(locate.SerializeAsString());
  }();
  return *bytes;
}

absl::StatusOr<v1::LocateResponse> SimulatedLocate(const std::string&) {
  v1::LocateResponse locate;
  locate.ParseFromString(SimulatedLocateBytes());
  return locate;
}

json Pod(bool required) {
  json annotations = {{"granary.io/datasets", "imagenet"}};
  if (required) annotations["granary.io/locality"] = "required";
  return {{"metadata",
           {{"name", "trainer-0"},
            {"namespace", "ml"},
            {"uid", "5c1f3d4e-9a8b-4c7d-8e6f-0a1b2c3d4e5f"},
            {"annotations", annotations}}},
          {"spec",
           {{"containers", json::array({{{"name", "trainer"},
                                         {"image", "registry.example.com/trainer:1.0"},
                                         {"resources", {{"limits", {{"nvidia.com/gpu", "8"}}}}}}})},
            {"schedulerName", "default-scheduler"}}},
          {"status", {{"phase", "Pending"}}}};
}

std::string NodeNamesBody(bool required) {
  json names = json::array();
  for (int i = 0; i < kNodes; ++i) names.push_back(NodeName(i));
  return json{{"Pod", Pod(required)}, {"Nodes", nullptr}, {"NodeNames", names}}.dump();
}

std::string NodeListBody() {
  json items = json::array();
  for (int i = 0; i < kNodes; ++i) {
    items.push_back(
        {{"metadata",
          {{"name", NodeName(i)},
           {"uid", absl::StrCat("uid-", i)},
           {"resourceVersion", "12345"},
           {"labels",
            {{"kubernetes.io/hostname", NodeName(i)},
             {"kubernetes.io/os", "linux"},
             {"topology.kubernetes.io/zone", absl::StrCat("rack-", i / kNodesPerGroup)}}}}},
         {"spec", {{"podCIDR", "10.244.0.0/24"}}},
         {"status",
          {{"capacity", {{"cpu", "96"}, {"memory", "1056766524Ki"}, {"nvidia.com/gpu", "8"}}},
           {"allocatable", {{"cpu", "95"}, {"memory", "1056664124Ki"}, {"nvidia.com/gpu", "8"}}},
           {"conditions",
            json::array({{{"type", "Ready"}, {"status", "True"}, {"reason", "KubeletReady"}}})},
           {"addresses",
            {{{"type", "InternalIP"}, {"address", absl::StrCat("10.0.", i / 256, ".", i % 256)}},
             {{"type", "Hostname"}, {"address", NodeName(i)}}}}}}});
  }
  return json{{"Pod", Pod(false)},
              {"Nodes", {{"metadata", json::object()}, {"items", items}}},
              {"NodeNames", nullptr}}
      .dump();
}

void BM_ScoreAllNodes(benchmark::State& state) {
  std::vector<std::string> names;
  for (int i = 0; i < kNodes; ++i) names.push_back(NodeName(i));
  for (auto _ : state) {
    granary::hooks::LocalityIndex index;
    index.Add(*SimulatedLocate("imagenet"));
    int total = 0;
    for (const std::string& name : names) total += index.Of(name).score;
    benchmark::DoNotOptimize(total);
  }
}
BENCHMARK(BM_ScoreAllNodes)->Unit(benchmark::kMillisecond);

void RunVerb(benchmark::State& state, const std::string& body, bool filter) {
  granary::hooks::Extender extender(SimulatedLocate, {});
  for (auto _ : state) {
    absl::StatusOr<std::string> reply = filter ? extender.Filter(body) : extender.Prioritize(body);
    if (!reply.ok()) state.SkipWithError("extender refused the request");
    benchmark::DoNotOptimize(reply);
  }
  state.counters["request_bytes"] = static_cast<double>(body.size());
}

void BM_PrioritizeNodeNames(benchmark::State& state) {
  RunVerb(state, NodeNamesBody(false), /*filter=*/false);
}
BENCHMARK(BM_PrioritizeNodeNames)->Unit(benchmark::kMillisecond);

void BM_PrioritizeNodeList(benchmark::State& state) {
  RunVerb(state, NodeListBody(), /*filter=*/false);
}
BENCHMARK(BM_PrioritizeNodeList)->Unit(benchmark::kMillisecond);

void BM_FilterRequired(benchmark::State& state) {
  RunVerb(state, NodeNamesBody(true), /*filter=*/true);
}
BENCHMARK(BM_FilterRequired)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
