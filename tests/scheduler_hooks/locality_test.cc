// Locality scoring and pod annotations, in-process: the scoring formula of
// scheduler_hooks/locality.h over several groups and datasets, the neutral
// cases, and what a pod's annotations ask for.
#include "scheduler_hooks/locality.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "scheduler_hooks/pod_request.h"

namespace granary::hooks {
namespace {

// A dataset of `total` bytes; nodes as (id, group, cached bytes).
v1::LocateResponse Locate(uint64_t total,
                          std::vector<std::tuple<std::string, std::string, uint64_t>> nodes) {
  v1::LocateResponse locate;
  locate.set_name("ds");
  locate.set_total_bytes(total);
  std::map<std::string, uint64_t> groups;
  for (const auto& [id, group, cached] : nodes) {
    v1::NodeLocality* node = locate.add_nodes();
    node->set_node_id(id);
    node->set_group(group);
    node->set_cached_bytes(cached);
    groups[group] += cached;
  }
  for (const auto& [group, cached] : groups) {
    v1::GroupLocality* entry = locate.add_groups();
    entry->set_group(group);
    entry->set_cached_bytes(cached);
  }
  return locate;
}

TEST(LocalityTest, GroupShareDominatesAndNodeShareBreaksTies) {
  LocalityIndex index;
  // rack-a holds all 1000 bytes (600 on a1, 400 on a2); rack-b holds 500 on b1.
  index.Add(Locate(
      1000,
      {{"a1", "rack-a", 600}, {"a2", "rack-a", 400}, {"b1", "rack-b", 500}, {"b2", "rack-b", 0}}));
  ASSERT_FALSE(index.neutral());
  NodeLocality a1 = index.Of("a1");
  EXPECT_EQ(a1.group, "rack-a");
  EXPECT_DOUBLE_EQ(a1.group_share, 1.0);
  EXPECT_DOUBLE_EQ(a1.node_share, 0.6);
  EXPECT_EQ(a1.score, 9);              // floor(10 * (0.8 + 0.12))
  EXPECT_EQ(index.Of("a2").score, 8);  // floor(10 * (0.8 + 0.08))
  EXPECT_EQ(index.Of("b1").score, 5);  // floor(10 * (0.4 + 0.1))
  EXPECT_EQ(index.Of("b2").score, 4);  // floor(10 * 0.4)
  NodeLocality stranger = index.Of("not-a-cache-node");
  EXPECT_EQ(stranger.group, "");
  EXPECT_EQ(stranger.score, 0);
}

TEST(LocalityTest, SingleNodeHoldingEverythingScoresTen) {
  LocalityIndex index;
  index.Add(Locate(4096, {{"n", "default", 4096}}));
  EXPECT_EQ(index.Of("n").score, kMaxScore);
}

TEST(LocalityTest, DatasetsAreWeightedByTheirBytes) {
  LocalityIndex index;
  index.Add(Locate(3000, {{"n", "g", 3000}}));  // Fully cached, 3/4 of the bytes.
  index.Add(Locate(1000, {{"n", "g", 0}}));     // Not cached.
  EXPECT_DOUBLE_EQ(index.Of("n").group_share, 0.75);
  EXPECT_EQ(index.Of("n").score, 7);
}

TEST(LocalityTest, AGroupIsCompleteOnlyWithEveryReplica) {
  // Two copies of each chunk in rack-a: its 1000 bytes are half of a
  // complete group, though they equal the dataset's size.
  v1::LocateResponse locate = Locate(1000, {{"a1", "rack-a", 500}, {"a2", "rack-a", 500}});
  locate.set_replicas(2);
  LocalityIndex index;
  index.Add(locate);
  EXPECT_DOUBLE_EQ(index.Of("a1").group_share, 0.5);
  EXPECT_DOUBLE_EQ(index.Of("a1").node_share, 0.5);
  EXPECT_EQ(index.Of("a1").score, 5);  // floor(10 * (0.4 + 0.1))
}

TEST(LocalityTest, NoDatasetOrEmptyDatasetsAreNeutral) {
  LocalityIndex index;
  EXPECT_TRUE(index.neutral());
  EXPECT_EQ(index.Of("n").score, 0);
  index.Add(Locate(0, {{"n", "g", 0}}));
  EXPECT_TRUE(index.neutral());
}

TEST(LocalityTest, ScoreOfClampsAndFloors) {
  EXPECT_EQ(ScoreOf(-0.5), 0);
  EXPECT_EQ(ScoreOf(0.0), 0);
  EXPECT_EQ(ScoreOf(0.099), 0);
  EXPECT_EQ(ScoreOf(0.1), 1);
  EXPECT_EQ(ScoreOf(0.8 * 1.0 + 0.2 * 1.0), 10);
  EXPECT_EQ(ScoreOf(1.5), 10);
}

TEST(PodRequestTest, ReadsDatasetsAndLocality) {
  nlohmann::json pod = {{"metadata",
                         {{"name", "p"},
                          {"annotations",
                           {{"granary.io/datasets", " imagenet, coco,,imagenet ,"},
                            {"granary.io/locality", "Required"}}}}}};
  absl::StatusOr<PodRequest> request = ReadPodRequest(pod, /*max_datasets=*/2);
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->datasets, (std::vector<std::string>{"imagenet", "coco"}));
  EXPECT_TRUE(request->locality_required);
}

TEST(PodRequestTest, ReadsGranaryCsiVolumesBeforeTheAnnotation) {
  nlohmann::json pod = nlohmann::json::parse(R"({
    "metadata": {"annotations": {"granary.io/datasets": "coco, imagenet"}},
    "spec": {"volumes": [
      {"name": "a", "csi": {"driver": "csi.granary.io", "volumeAttributes": {"dataset": "imagenet"}}},
      {"name": "b", "csi": {"driver": "csi.example.com", "volumeAttributes": {"dataset": "other"}}},
      {"name": "c", "csi": {"driver": "csi.granary.io", "volumeAttributes": {"dataset": 7}}},
      {"name": "d", "csi": {"driver": "csi.granary.io"}},
      {"name": "e", "persistentVolumeClaim": {"claimName": "laion"}},
      {"name": "f", "csi": {"driver": "csi.granary.io", "volumeAttributes": {"dataset": "laion"}}}
    ]}})");
  absl::StatusOr<PodRequest> request = ReadPodRequest(pod, /*max_datasets=*/8);
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->datasets, (std::vector<std::string>{"imagenet", "laion", "coco"}));
  EXPECT_FALSE(request->locality_required);
  // Volumes and annotation count together against the cap.
  EXPECT_EQ(ReadPodRequest(pod, /*max_datasets=*/2).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(PodRequestTest, MoreDistinctDatasetsThanTheCapAreRefused) {
  std::string names;
  for (int i = 0; i < 20000; ++i) absl::StrAppend(&names, i == 0 ? "" : ",", "d", i % 5000);
  nlohmann::json pod = {{"metadata", {{"annotations", {{"granary.io/datasets", names}}}}}};
  absl::StatusOr<PodRequest> request = ReadPodRequest(pod, /*max_datasets=*/64);
  EXPECT_EQ(request.status(),
            absl::InvalidArgumentError("the pod names 5000 datasets (Granary volumes and "
                                       "annotation granary.io/datasets); at most 64 are allowed"));
  request = ReadPodRequest(pod, /*max_datasets=*/5000);
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->datasets.size(), 5000u);
}

TEST(PodRequestTest, MissingOrMistypedAnnotationsAskForNothing) {
  for (const nlohmann::json& pod :
       {nlohmann::json(nullptr), nlohmann::json::object(), nlohmann::json{{"metadata", 5}},
        nlohmann::json{{"metadata", {{"annotations", nullptr}}}},
        nlohmann::json{{"metadata", {{"annotations", {{"granary.io/datasets", 7}}}}}},
        nlohmann::json{{"metadata", {{"annotations", {{"granary.io/locality", "preferred"}}}}}}}) {
    absl::StatusOr<PodRequest> request = ReadPodRequest(pod, /*max_datasets=*/1);
    ASSERT_TRUE(request.ok()) << request.status();
    EXPECT_TRUE(request->datasets.empty()) << pod.dump();
    EXPECT_FALSE(request->locality_required) << pod.dump();
  }
}

}  // namespace
}  // namespace granary::hooks
