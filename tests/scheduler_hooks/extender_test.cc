// The granary-extender binary over real HTTP against a real granaryd holding
// real datasets, some partially prewarmed. Request bodies are shaped like
// kube-scheduler's: a full v1.Pod as its informer holds it, candidates as a
// NodeList of full v1.Node objects or as NodeNames (nodeCacheCapable), and every
// field of every reply is checked.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "nlohmann/json.hpp"
#include "tests/scheduler_hooks/extender_process.h"
#include "tests/support/child_process.h"
#include "tests/support/granary_cluster.h"
#include "tests/support/granaryd_process.h"
#include "tests/support/suite_setup.h"

namespace granary {
namespace {

using nlohmann::json;
using testing::AddDataset;
using testing::ExtenderProcess;
using testing::GranarydProcess;
using testing::kMiB;
using testing::SuiteSetup;
using testing::TempDir;

// A pending pod as kube-scheduler's informer holds it (Go omits the empty
// TypeMeta), with `annotations`.
json Pod(const json& annotations) {
  json pod = json::parse(R"({
    "metadata": {
      "name": "resnet-train-0", "namespace": "ml", "uid": "1d6f3a52-7f0e-4a8f-9a57-5d8c0b7e2f11",
      "resourceVersion": "48213", "creationTimestamp": "2026-11-30T04:00:00Z",
      "labels": {"app": "resnet", "job-name": "resnet-train"},
      "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "resnet-train",
        "uid": "9e1c2b3a-0d4f-4e5a-8b6c-7d8e9f0a1b2c", "controller": true,
        "blockOwnerDeletion": true}]
    },
    "spec": {
      "volumes": [{"name": "granary", "hostPath": {"path": "/mnt/granary", "type": "Directory"}},
        {"name": "kube-api-access-x7k2p", "projected": {"sources": [{"serviceAccountToken":
          {"expirationSeconds": 3607, "path": "token"}}], "defaultMode": 420}}],
      "containers": [{"name": "trainer", "image": "registry.example.com/resnet:2.1",
        "command": ["python3", "train.py", "--data", "/data/imagenet"],
        "resources": {"limits": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "8"},
                      "requests": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "8"}},
        "volumeMounts": [{"name": "granary", "readOnly": true, "mountPath": "/data",
                          "mountPropagation": "HostToContainer"},
                         {"name": "kube-api-access-x7k2p", "readOnly": true,
                          "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}],
        "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent"}],
      "restartPolicy": "Never", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
      "serviceAccountName": "default", "serviceAccount": "default", "securityContext": {},
      "schedulerName": "default-scheduler",
      "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                       "effect": "NoExecute", "tolerationSeconds": 300}],
      "priority": 0, "enableServiceLinks": true, "preemptionPolicy": "PreemptLowerPriority"
    },
    "status": {"phase": "Pending", "qosClass": "Guaranteed",
      "conditions": [{"type": "PodScheduled", "status": "False", "lastProbeTime": null,
        "lastTransitionTime": "2026-11-30T04:00:01Z", "reason": "Unschedulable",
        "message": "0/2 nodes are available"}]}
  })");
  pod["metadata"]["annotations"] = annotations;
  return pod;
}

json Node(const std::string& name, const std::string& ip) {
  return {
      {"metadata",
       {{"name", name},
        {"uid", "uid-" + name},
        {"resourceVersion", "48100"},
        {"creationTimestamp", "2026-11-01T00:00:00Z"},
        {"labels",
         {{"kubernetes.io/hostname", name},
          {"kubernetes.io/os", "linux"},
          {"topology.kubernetes.io/zone", "rack-a"}}}}},
      {"spec", {{"podCIDR", "10.244.1.0/24"}, {"podCIDRs", json::array({"10.244.1.0/24"})}}},
      {"status",
       {{"capacity", {{"cpu", "96"}, {"memory", "1056766524Ki"}, {"nvidia.com/gpu", "8"}}},
        {"allocatable", {{"cpu", "95"}, {"memory", "1056664124Ki"}, {"nvidia.com/gpu", "8"}}},
        {"conditions", json::array({{{"type", "Ready"},
                                     {"status", "True"},
                                     {"lastHeartbeatTime", "2026-11-30T03:59:00Z"},
                                     {"lastTransitionTime", "2026-11-01T00:01:00Z"},
                                     {"reason", "KubeletReady"},
                                     {"message", "kubelet is posting ready status"}}})},
        {"addresses",
         {{{"type", "InternalIP"}, {"address", ip}}, {{"type", "Hostname"}, {"address", name}}}},
        {"nodeInfo", {{"kubeletVersion", "v1.29.4"}, {"architecture", "amd64"}}}}}};
}

// ExtenderArgs in the NodeList form (nodeCacheCapable: false).
json ListArgs(const json& annotations) {
  return {{"Pod", Pod(annotations)},
          {"Nodes",
           {{"metadata", json::object()},
            {"items", json::array({Node("node-a", "10.0.0.1"), Node("node-b", "10.0.0.2")})}}},
          {"NodeNames", nullptr}};
}

// ExtenderArgs in the NodeNames form (nodeCacheCapable: true).
json NameArgs(const json& annotations) {
  return {{"Pod", Pod(annotations)},
          {"Nodes", nullptr},
          {"NodeNames", json::array({"node-a", "node-b"})}};
}

json Priorities(int a, int b) {
  return {{{"Host", "node-a"}, {"Score", a}}, {{"Host", "node-b"}, {"Score", b}}};
}

// One granaryd as node "node-a" in group "rack-a"; "node-b" is a Kubernetes
// node without Granary. Datasets (MiB):
//   half:    a.bin 3 (prewarmed), b.bin 1  -> 75% cached
//   full:    c.bin 4 (prewarmed)           -> 100%
//   quarter: d.bin 1 (prewarmed), e.bin 3  -> 25%
class ExtenderTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(suite_setup_.RunOnce(StartServer)); }

  static void StartServer() {
    sources_ = new TempDir();
    testing::GranarydOptions options;
    options.extra_args = {"--node-id", "node-a", "--group", "rack-a"};
    auto server = GranarydProcess::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = server->release();
    AddDataset(*server_, sources_->path(), "half", {{"a.bin", 3}, {"b.bin", 1}}, {"a.bin"});
    AddDataset(*server_, sources_->path(), "full", {{"c.bin", 4}}, {"c.bin"});
    AddDataset(*server_, sources_->path(), "quarter", {{"d.bin", 1}, {"e.bin", 3}}, {"d.bin"});
    extender_ = new ExtenderProcess(server_->socket_address());
  }
  static void TearDownTestSuite() {
    delete extender_;
    delete server_;
    delete sources_;
    extender_ = nullptr;
    server_ = nullptr;
    sources_ = nullptr;
    suite_setup_ = SuiteSetup();  // A suite derived from this one starts its own.
  }

  static SuiteSetup suite_setup_;
  static TempDir* sources_;
  static GranarydProcess* server_;
  static ExtenderProcess* extender_;
};

SuiteSetup ExtenderTest::suite_setup_;
TempDir* ExtenderTest::sources_ = nullptr;
GranarydProcess* ExtenderTest::server_ = nullptr;
ExtenderProcess* ExtenderTest::extender_ = nullptr;

TEST_F(ExtenderTest, PrioritizeScoresNodesByCachedShare) {
  EXPECT_EQ(extender_->PostJson("/prioritize", NameArgs({{"granary.io/datasets", "half"}})),
            Priorities(7, 0));
  EXPECT_EQ(extender_->PostJson("/prioritize", NameArgs({{"granary.io/datasets", "full"}})),
            Priorities(10, 0));
  EXPECT_EQ(extender_->PostJson("/prioritize", ListArgs({{"granary.io/datasets", "quarter"}})),
            Priorities(2, 0));
}

TEST_F(ExtenderTest, PrioritizeWeighsSeveralDatasetsByBytes) {
  // (3 + 4) MiB cached of (4 + 4) MiB: 87.5%.
  EXPECT_EQ(extender_->PostJson("/prioritize", ListArgs({{"granary.io/datasets", "half, full"}})),
            Priorities(8, 0));
  // An unknown dataset among known ones is left out.
  EXPECT_EQ(extender_->PostJson("/prioritize",
                                NameArgs({{"granary.io/datasets", "full,no-such-dataset"}})),
            Priorities(10, 0));
}

TEST_F(ExtenderTest, GranaryCsiVolumesNameDatasetsAsTheAnnotationDoes) {
  // Inline csi.granary.io volumes count as the annotation would; another
  // driver's volume does not.
  json args = NameArgs({{"granary.io/locality", "required"}});
  args["Pod"]["spec"]["volumes"].push_back(
      {{"name", "imagenet"},
       {"csi", {{"driver", "csi.granary.io"}, {"volumeAttributes", {{"dataset", "half"}}}}}});
  args["Pod"]["spec"]["volumes"].push_back(
      {{"name", "other"},
       {"csi", {{"driver", "csi.example.com"}, {"volumeAttributes", {{"dataset", "full"}}}}}});
  EXPECT_EQ(extender_->PostJson("/prioritize", args), Priorities(7, 0));
  EXPECT_EQ(extender_->PostJson("/filter", args)["NodeNames"], json::array({"node-a"}));
  json list_args = ListArgs({{"granary.io/datasets", "full"}});
  list_args["Pod"]["spec"]["volumes"] = args["Pod"]["spec"]["volumes"];
  // (4 + 3) of (4 + 4) MiB.
  EXPECT_EQ(extender_->PostJson("/prioritize", list_args), Priorities(8, 0));
}

TEST_F(ExtenderTest, NoOrUnknownDatasetsGetNeutralScores) {
  EXPECT_EQ(extender_->PostJson("/prioritize", NameArgs(json::object())), Priorities(0, 0));
  EXPECT_EQ(extender_->PostJson("/prioritize", ListArgs({{"granary.io/datasets", ""}})),
            Priorities(0, 0));
  EXPECT_EQ(
      extender_->PostJson("/prioritize", NameArgs({{"granary.io/datasets", "no-such-dataset"}})),
      Priorities(0, 0));
}

TEST_F(ExtenderTest, FilterWithoutRequiredLocalityKeepsEveryNode) {
  json args = ListArgs({{"granary.io/datasets", "quarter"}});
  json reply = extender_->PostJson("/filter", args);
  EXPECT_EQ(reply, (json{{"Nodes", args["Nodes"]},
                         {"NodeNames", nullptr},
                         {"FailedNodes", json::object()},
                         {"FailedAndUnresolvableNodes", json::object()},
                         {"Error", ""}}));

  reply = extender_->PostJson("/filter", NameArgs({{"granary.io/datasets", "quarter"}}));
  EXPECT_EQ(reply, (json{{"Nodes", nullptr},
                         {"NodeNames", json::array({"node-a", "node-b"})},
                         {"FailedNodes", json::object()},
                         {"FailedAndUnresolvableNodes", json::object()},
                         {"Error", ""}}));
}

TEST_F(ExtenderTest, FilterWithRequiredLocalityRemovesNodesWithoutTheData) {
  json annotations = {{"granary.io/datasets", "half"}, {"granary.io/locality", "required"}};
  const json unresolvable = {
      {"node-b", "granary: not a Granary cache node, and the pod requires locality of half"}};

  json reply = extender_->PostJson("/filter", NameArgs(annotations));
  EXPECT_EQ(reply, (json{{"Nodes", nullptr},
                         {"NodeNames", json::array({"node-a"})},
                         {"FailedNodes", json::object()},
                         {"FailedAndUnresolvableNodes", unresolvable},
                         {"Error", ""}}));

  json args = ListArgs(annotations);
  reply = extender_->PostJson("/filter", args);
  json passed = args["Nodes"];
  passed["items"] = json::array({args["Nodes"]["items"][0]});  // node-a's object, unchanged.
  EXPECT_EQ(reply, (json{{"Nodes", passed},
                         {"NodeNames", nullptr},
                         {"FailedNodes", json::object()},
                         {"FailedAndUnresolvableNodes", unresolvable},
                         {"Error", ""}}));
}

TEST_F(ExtenderTest, FilterWithRequiredLocalityBelowThresholdRemovesEveryNode) {
  json reply = extender_->PostJson("/filter", NameArgs({{"granary.io/datasets", "quarter"},
                                                        {"granary.io/locality", "required"}}));
  EXPECT_EQ(
      reply,
      (json{
          {"Nodes", nullptr},
          {"NodeNames", json::array()},
          {"FailedNodes", json::object()},
          {"FailedAndUnresolvableNodes",
           {{"node-a", "granary: cache group 'rack-a' holds 25% of quarter; the pod requires 50%"},
            {"node-b",
             "granary: not a Granary cache node, and the pod requires locality of "
             "quarter"}}},
          {"Error", ""}}));
}

TEST_F(ExtenderTest, FilterWithRequiredLocalityOfUnknownDatasetKeepsEveryNode) {
  json reply = extender_->PostJson("/filter", NameArgs({{"granary.io/datasets", "no-such-dataset"},
                                                        {"granary.io/locality", "required"}}));
  EXPECT_EQ(reply["NodeNames"], json::array({"node-a", "node-b"}));
  EXPECT_EQ(reply["FailedAndUnresolvableNodes"], json::object());
  EXPECT_EQ(reply["Error"], "");
}

TEST_F(ExtenderTest, MalformedRequestsAreRefusedWithTheReason) {
  auto [status, body] = extender_->Post("/prioritize", "{not json");
  EXPECT_EQ(status, 400);
  EXPECT_EQ(body, "request body is not a JSON ExtenderArgs object\n");
  std::tie(status, body) = extender_->Post("/filter", R"({"Pod": {}})");
  EXPECT_EQ(status, 400);
  EXPECT_EQ(body, "ExtenderArgs has neither Nodes nor NodeNames\n");
  std::tie(status, body) =
      extender_->Post("/filter", R"({"Pod": {}, "Nodes": {"items": [{"spec": {}}]}})");
  EXPECT_EQ(status, 400);
  EXPECT_EQ(body, "a node in ExtenderArgs.Nodes has no metadata.name\n");
  std::tie(status, body) = extender_->Post("/prioritize", R"({"NodeNames": [1]})");
  EXPECT_EQ(status, 400);
  EXPECT_EQ(body, "ExtenderArgs.NodeNames holds a non-string\n");
  // Prioritize builds only the names of the NodeList's nodes: the same checks.
  for (const char* verb : {"/filter", "/prioritize"}) {
    for (const auto& [request, reason] : std::vector<std::pair<std::string, std::string>>{
             {"[1]", "request body is not a JSON ExtenderArgs object\n"},
             {R"({"Pod": {}} trailing)", "request body is not a JSON ExtenderArgs object\n"},
             {R"({"Pod": {}, "NodeNames": null})",
              "ExtenderArgs has neither Nodes nor NodeNames\n"},
             {R"({"NodeNames": {"a": 1}})", "ExtenderArgs.NodeNames is not a list\n"},
             {R"({"NodeNames": ["a", null]})", "ExtenderArgs.NodeNames holds a non-string\n"},
             {R"({"Nodes": []})", "ExtenderArgs.Nodes is not a NodeList\n"},
             {R"({"Nodes": {"items": {}}})", "ExtenderArgs.Nodes.items is not a list\n"},
             {R"({"Nodes": {"items": [{"metadata": {"name": "a"}}, 2]}})",
              "a node in ExtenderArgs.Nodes has no metadata.name\n"},
             {R"({"Nodes": {"items": [{"metadata": {"name": 7}}]}})",
              "a node in ExtenderArgs.Nodes has no metadata.name\n"},
         }) {
      std::tie(status, body) = extender_->Post(verb, request);
      EXPECT_EQ(status, 400) << verb << " " << request;
      EXPECT_EQ(body, reason) << verb << " " << request;
    }
  }
  // Found by tests/fuzz/extender_fuzzer: a node object nested this deep
  // overflowed Filter's stack when written back out.
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  for (const char* verb : {"/filter", "/prioritize"}) {
    std::tie(status, body) = extender_->Post(
        verb, R"({"Nodes": {"items": [{"metadata": {"name": "a"}, "x": )" + deep + "}]}}");
    EXPECT_EQ(status, 400) << verb;
    EXPECT_EQ(body, "request body nests deeper than 512 levels\n") << verb;
  }
  std::tie(status, body) = extender_->Post("/bind", "{}");
  EXPECT_EQ(status, 404);
  // The server keeps serving.
  EXPECT_EQ(extender_->PostJson("/prioritize", NameArgs({{"granary.io/datasets", "full"}})),
            Priorities(10, 0));
}

// The extender's Locate calls, counted between it and granaryd.
class ExtenderLocateCallsTest : public ExtenderTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(ExtenderTest::SetUp());
    auto counter =
        testing::LocateCounter::Start(temp_.path() + "/counter.sock", server_->socket_address());
    ASSERT_TRUE(counter.ok()) << counter.status();
    counter_ = *std::move(counter);
  }

  TempDir temp_;
  std::unique_ptr<testing::LocateCounter> counter_;
};

TEST_F(ExtenderLocateCallsTest, RepeatedNamesAreLocatedOnce) {
  ExtenderProcess extender(counter_->address(), {"--locate-cache-ms", "0"});
  EXPECT_EQ(extender.PostJson("/prioritize",
                              NameArgs({{"granary.io/datasets", "half, full,half,full , half"}})),
            Priorities(8, 0));
  EXPECT_EQ(counter_->calls(), 2);
}

TEST_F(ExtenderLocateCallsTest, ABurstOfDecisionsReusesTheAnswers) {
  ExtenderProcess extender(counter_->address(), {"--locate-cache-ms", "600000"});
  json annotations = {{"granary.io/datasets", "half, full"}, {"granary.io/locality", "required"}};
  for (int pod = 0; pod < 20; ++pod) {
    EXPECT_EQ(extender.PostJson("/filter", NameArgs(annotations))["NodeNames"],
              json::array({"node-a"}));
    EXPECT_EQ(extender.PostJson("/prioritize", NameArgs(annotations)), Priorities(8, 0));
  }
  EXPECT_EQ(counter_->calls(), 2);
  // A dataset not asked before is located; an unknown one is remembered as
  // unknown.
  json other = {{"granary.io/datasets", "quarter, no-such-dataset"}};
  EXPECT_EQ(extender.PostJson("/prioritize", NameArgs(other)), Priorities(2, 0));
  EXPECT_EQ(extender.PostJson("/prioritize", NameArgs(other)), Priorities(2, 0));
  EXPECT_EQ(counter_->calls(), 4);
}

TEST_F(ExtenderLocateCallsTest, WithoutReuseEveryDecisionLocates) {
  ExtenderProcess extender(counter_->address(), {"--locate-cache-ms", "0"});
  for (int pod = 0; pod < 3; ++pod) {
    EXPECT_EQ(extender.PostJson("/prioritize", NameArgs({{"granary.io/datasets", "half, full"}})),
              Priorities(8, 0));
  }
  EXPECT_EQ(counter_->calls(), 6);
}

TEST_F(ExtenderLocateCallsTest, TooManyDatasetsAreRefusedWithoutALocateCall) {
  ExtenderProcess extender(counter_->address(), {"--max-datasets-per-pod", "3"});
  // Five distinct names; the repeat counts once.
  json annotations = {{"granary.io/datasets", "half, full, quarter, a, b, half"}};
  const std::string refusal =
      "the pod names 5 datasets (Granary volumes and annotation granary.io/datasets); at most 3 "
      "are allowed";
  EXPECT_EQ(extender.PostJson("/filter", NameArgs(annotations)),
            (json{{"Nodes", nullptr},
                  {"NodeNames", nullptr},
                  {"FailedNodes", json::object()},
                  {"FailedAndUnresolvableNodes", json::object()},
                  {"Error", "granary: " + refusal}}));
  // A HostPriorityList has no error field: the call fails.
  auto [status, body] = extender.Post("/prioritize", NameArgs(annotations).dump());
  EXPECT_EQ(status, 400);
  EXPECT_EQ(body, refusal + "\n");
  EXPECT_EQ(counter_->calls(), 0);
  // Three names, one of them twice, are served.
  EXPECT_EQ(extender.PostJson("/prioritize",
                              NameArgs({{"granary.io/datasets", "half, full, quarter, full"}})),
            Priorities(6, 0));
  EXPECT_EQ(counter_->calls(), 3);
}

TEST(ExtenderUnreachableTest, UnreachableServerGivesNeutralAnswersAndALogLine) {
  TempDir dir;
  ExtenderProcess extender("unix:" + dir.path() + "/no-granaryd.sock");
  json annotations = {{"granary.io/datasets", "half"}, {"granary.io/locality", "required"}};
  EXPECT_EQ(extender.PostJson("/prioritize", NameArgs(annotations)), Priorities(0, 0));
  json reply = extender.PostJson("/filter", NameArgs(annotations));
  EXPECT_EQ(reply, (json{{"Nodes", nullptr},
                         {"NodeNames", json::array({"node-a", "node-b"})},
                         {"FailedNodes", json::object()},
                         {"FailedAndUnresolvableNodes", json::object()},
                         {"Error", ""}}));
  EXPECT_THAT(extender.log(),
              ::testing::ContainsRegex("cannot locate dataset 'half': .*; answering neutrally"));
  EXPECT_EQ(extender.Terminate(), 0);
}

TEST(ExtenderFlagsTest, UnusableListenAddressFailsWithTheReason) {
  TempDir dir;
  auto pid =
      testing::SpawnChild(testing::ExtenderPath(), {"--listen", "no-port"}, dir.path() + "/log");
  ASSERT_TRUE(pid.ok());
  auto status = testing::WaitForExit(*pid, std::chrono::seconds(10));
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(WEXITSTATUS(*status), 1);
  std::ifstream in(dir.path() + "/log");
  std::string log(std::istreambuf_iterator<char>(in), {});
  EXPECT_NE(log.find("granary-extender: address 'no-port' is not HOST:PORT"), std::string::npos)
      << log;
}

// A real cluster of four granaryd in two cache groups, TCP calls authenticated
// by the cluster token: a1, a2 in rack-a and b1, b2 in rack-b. "images" (8
// files of 3 MiB, 1 MiB chunks) is prewarmed into rack-a only. The extender
// asks b2 (a cold node) over TCP with the token, and Locate answers for the
// whole cluster; "gpu-x" is a Kubernetes node without Granary.
constexpr char kClusterToken[] = "granary-extender-test-token-0123456789";
constexpr uint64_t kImagesBytes = 8 * 3 * kMiB;
const std::vector<std::string> kClusterNodeNames = {"a1", "b1", "a2", "gpu-x", "b2"};

class ExtenderClusterTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(suite_setup_.RunOnce(StartCluster)); }

  static void StartCluster() {
    temp_ = new TempDir();
    token_file_ = new std::string(temp_->path() + "/token");
    {
      std::ofstream(*token_file_) << kClusterToken << "\n";
      std::filesystem::permissions(
          *token_file_, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
    }
    auto cluster = testing::GranaryCluster::StartFormed(
        {.nodes = {{"a1", "rack-a"}, {"a2", "rack-a"}, {"b1", "rack-b"}, {"b2", "rack-b"}},
         .etcd_endpoint = "",
         .extra_args = {"--token-file", *token_file_}});
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = cluster->release();
    std::string source = temp_->path() + "/images";
    std::filesystem::create_directories(source);
    for (int file = 0; file < 8; ++file) {
      // Distinct bytes in every chunk.
      std::ofstream out(source + "/f" + std::to_string(file) + ".bin", std::ios::binary);
      for (int chunk = 0; chunk < 3; ++chunk) {
        std::string block(kMiB, static_cast<char>('a' + file));
        std::string tag = absl::StrCat("file ", file, " chunk ", chunk);
        block.replace(0, tag.size(), tag);
        out.write(block.data(), block.size());
      }
    }
    auto stub = cluster_->node(0).SocketStub();
    {
      grpc::ClientContext context;
      v1::AddDatasetRequest request;
      request.set_name("images");
      request.set_source(source);
      request.set_chunk_size(kMiB);
      v1::DatasetInfo info;
      grpc::Status status = stub->AddDataset(&context, request, &info);
      ASSERT_TRUE(status.ok()) << status.error_message();
    }
    // Prewarm rack-a, asked of a node of rack-b: it fans out to a1 and a2.
    grpc::ClientContext context;
    v1::PrewarmRequest request;
    request.set_name("images");
    request.set_group("rack-a");
    auto reader = cluster_->node(3).SocketStub()->Prewarm(&context, request);
    v1::PrewarmProgress progress;
    while (reader->Read(&progress)) {
    }
    grpc::Status status = reader->Finish();
    ASSERT_TRUE(status.ok()) << status.error_message();
    ASSERT_EQ(progress.failures_size(), 0);
    ASSERT_NO_FATAL_FAILURE(AddPairs());
    // The extender and the CLI read what the nodes published.
    for (size_t i = 0; i < cluster_->size(); ++i) {
      for (const char* dataset : {"images", "pairs"}) {
        absl::Status published = cluster_->WaitForPublishedLocality(i, dataset);
        ASSERT_TRUE(published.ok()) << published;
      }
    }
    extender_ =
        new ExtenderProcess(cluster_->node(3).tcp_address(), {"--token-file", *token_file_});
  }

  // "pairs": 4 files of 1 MiB at 2 replicas; f0-f2 prewarmed into rack-a (both
  // its nodes hold each chunk) and f0 into rack-b.
  static void AddPairs() {
    std::string source = temp_->path() + "/pairs";
    std::filesystem::create_directories(source);
    for (int file = 0; file < 4; ++file) {
      std::string block(kMiB, static_cast<char>('p' + file));
      std::ofstream(source + "/f" + std::to_string(file) + ".bin", std::ios::binary) << block;
    }
    auto stub = cluster_->node(0).SocketStub();
    grpc::ClientContext add_call;
    v1::AddDatasetRequest add;
    add.set_name("pairs");
    add.set_source(source);
    add.set_chunk_size(kMiB);
    add.set_replicas(2);
    v1::DatasetInfo info;
    grpc::Status added = stub->AddDataset(&add_call, add, &info);
    ASSERT_TRUE(added.ok()) << added.error_message();
    for (const auto& [group, paths] : std::vector<std::pair<std::string, std::vector<std::string>>>{
             {"rack-a", {"f0.bin", "f1.bin", "f2.bin"}}, {"rack-b", {"f0.bin"}}}) {
      grpc::ClientContext context;
      v1::PrewarmRequest request;
      request.set_name("pairs");
      request.set_group(group);
      for (const std::string& path : paths) request.add_paths(path);
      auto reader = stub->Prewarm(&context, request);
      v1::PrewarmProgress progress;
      while (reader->Read(&progress)) {
      }
      grpc::Status status = reader->Finish();
      ASSERT_TRUE(status.ok()) << group << ": " << status.error_message();
      ASSERT_EQ(progress.failures_size(), 0) << group;
    }
  }

  // Runs the CLI with the cluster token against a2; its standard output.
  static std::string RunCli(const std::vector<std::string>& args) {
    std::string output = temp_->path() + "/cli.out";
    std::filesystem::remove(output);
    std::vector<std::string> argv = {"--server", cluster_->node(1).tcp_address(), "--token-file",
                                     *token_file_};
    argv.insert(argv.end(), args.begin(), args.end());
    auto pid = testing::SpawnChild(GRANARY_CLI_PATH, argv, output);
    EXPECT_TRUE(pid.ok()) << pid.status();
    if (!pid.ok()) return "";
    auto status = testing::WaitForExit(*pid, std::chrono::seconds(30));
    EXPECT_TRUE(status.has_value() && WIFEXITED(*status) && WEXITSTATUS(*status) == 0);
    std::ifstream in(output);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  static void TearDownTestSuite() {
    delete extender_;
    delete cluster_;
    delete token_file_;
    delete temp_;
    extender_ = nullptr;
    cluster_ = nullptr;
    token_file_ = nullptr;
    temp_ = nullptr;
    suite_setup_ = SuiteSetup();
  }

  // The cluster's Locate answer for "images", asked of b1's socket.
  static v1::LocateResponse Locate() {
    grpc::ClientContext context;
    v1::LocateRequest request;
    request.set_name("images");
    v1::LocateResponse response;
    grpc::Status status = cluster_->node(2).SocketStub()->Locate(&context, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response;
  }

  static json ClusterNameArgs(const json& annotations) {
    return {{"Pod", Pod(annotations)}, {"Nodes", nullptr}, {"NodeNames", kClusterNodeNames}};
  }
  static json ClusterListArgs(const json& annotations) {
    json items = json::array();
    for (size_t i = 0; i < kClusterNodeNames.size(); ++i) {
      items.push_back(Node(kClusterNodeNames[i], absl::StrCat("10.0.1.", i + 1)));
    }
    return {{"Pod", Pod(annotations)},
            {"Nodes", {{"metadata", json::object()}, {"items", items}}},
            {"NodeNames", nullptr}};
  }

  static SuiteSetup suite_setup_;
  static TempDir* temp_;
  static std::string* token_file_;
  static testing::GranaryCluster* cluster_;
  static ExtenderProcess* extender_;
};

SuiteSetup ExtenderClusterTest::suite_setup_;
TempDir* ExtenderClusterTest::temp_ = nullptr;
std::string* ExtenderClusterTest::token_file_ = nullptr;
testing::GranaryCluster* ExtenderClusterTest::cluster_ = nullptr;
ExtenderProcess* ExtenderClusterTest::extender_ = nullptr;

TEST_F(ExtenderClusterTest, LocateShowsTheWarmAndTheColdGroup) {
  // `granary locate --json` over TCP with the token, asked of a2.
  std::string output = temp_->path() + "/locate.json";
  auto pid = testing::SpawnChild(GRANARY_CLI_PATH,
                                 {"--server", cluster_->node(1).tcp_address(), "--token-file",
                                  *token_file_, "locate", "images", "--json"},
                                 output);
  ASSERT_TRUE(pid.ok()) << pid.status();
  auto status = testing::WaitForExit(*pid, std::chrono::seconds(30));
  ASSERT_TRUE(status.has_value() && WIFEXITED(*status) && WEXITSTATUS(*status) == 0);
  std::ifstream in(output);
  json locate = json::parse(in, nullptr, false);
  ASSERT_FALSE(locate.is_discarded());
  EXPECT_EQ(locate["name"], "images");
  EXPECT_EQ(locate["total_bytes"], kImagesBytes);
  json groups = json::object();
  for (const json& group : locate["groups"]) groups[group["group"].get<std::string>()] = group;
  EXPECT_EQ(
      groups,
      (json{{"rack-a", {{"group", "rack-a"}, {"cached_bytes", kImagesBytes}, {"fraction", 1.0}}},
            {"rack-b", {{"group", "rack-b"}, {"cached_bytes", 0}, {"fraction", 0.0}}}}))
      << locate.dump();
  ASSERT_EQ(locate["nodes"].size(), 4u) << locate.dump();
  uint64_t warm_bytes = 0;
  for (const json& node : locate["nodes"]) {
    std::string id = node["node_id"];
    uint64_t bytes = node["cached_bytes"];
    if (node["group"] == "rack-a") {
      // Both members of the warm group own a share of the chunks.
      EXPECT_TRUE(id == "a1" || id == "a2") << id;
      EXPECT_GT(bytes, 0u) << id;
      EXPECT_LT(bytes, kImagesBytes) << id;
      EXPECT_DOUBLE_EQ(node["node_fraction"].get<double>(),
                       static_cast<double>(bytes) / kImagesBytes);
      EXPECT_EQ(node["group_fraction"], 1.0) << id;
      warm_bytes += bytes;
    } else {
      EXPECT_EQ(node["group"], "rack-b") << id;
      EXPECT_TRUE(id == "b1" || id == "b2") << id;
      EXPECT_EQ(bytes, 0u) << id;
      EXPECT_EQ(node["node_fraction"], 0.0) << id;
      EXPECT_EQ(node["group_fraction"], 0.0) << id;
    }
  }
  EXPECT_EQ(warm_bytes, kImagesBytes);

  // Without the token the TCP call is refused.
  pid = testing::SpawnChild(
      GRANARY_CLI_PATH, {"--server", cluster_->node(1).tcp_address(), "locate", "images"}, output);
  ASSERT_TRUE(pid.ok()) << pid.status();
  status = testing::WaitForExit(*pid, std::chrono::seconds(30));
  ASSERT_TRUE(status.has_value() && WIFEXITED(*status));
  EXPECT_NE(WEXITSTATUS(*status), 0);
}

TEST_F(ExtenderClusterTest, PrioritizeRanksTheWarmGroupAboveTheColdGroup) {
  // Expected scores from the cluster's own figures: 0.8 * group + 0.2 * node.
  std::map<std::string, int> expected = {{"b1", 0}, {"b2", 0}, {"gpu-x", 0}};
  const v1::LocateResponse locate = Locate();
  for (const v1::NodeLocality& node : locate.nodes()) {
    if (node.group() != "rack-a") continue;
    double share = static_cast<double>(node.cached_bytes()) / kImagesBytes;
    expected[node.node_id()] = static_cast<int>(std::floor(10 * (0.8 + 0.2 * share) + 1e-9));
  }
  ASSERT_EQ(expected.size(), 5u);
  // Each of a1, a2 holds part of the data: 8 or 9, never a cold node's 0.
  EXPECT_GE(expected["a1"], 8);
  EXPECT_GE(expected["a2"], 8);
  json priorities = json::array();
  for (const std::string& name : kClusterNodeNames) {
    priorities.push_back({{"Host", name}, {"Score", expected[name]}});
  }
  json annotations = {{"granary.io/datasets", "images"}};
  EXPECT_EQ(extender_->PostJson("/prioritize", ClusterNameArgs(annotations)), priorities);
  EXPECT_EQ(extender_->PostJson("/prioritize", ClusterListArgs(annotations)), priorities);
}

TEST_F(ExtenderClusterTest, RequiredLocalityFiltersTheColdGroup) {
  json annotations = {{"granary.io/datasets", "images"}, {"granary.io/locality", "required"}};
  const json unresolvable = {
      {"b1", "granary: cache group 'rack-b' holds 0% of images; the pod requires 50%"},
      {"gpu-x", "granary: not a Granary cache node, and the pod requires locality of images"},
      {"b2", "granary: cache group 'rack-b' holds 0% of images; the pod requires 50%"}};
  EXPECT_EQ(extender_->PostJson("/filter", ClusterNameArgs(annotations)),
            (json{{"Nodes", nullptr},
                  {"NodeNames", json::array({"a1", "a2"})},
                  {"FailedNodes", json::object()},
                  {"FailedAndUnresolvableNodes", unresolvable},
                  {"Error", ""}}));

  json args = ClusterListArgs(annotations);
  json passed = args["Nodes"];
  passed["items"] = json::array({args["Nodes"]["items"][0], args["Nodes"]["items"][2]});
  EXPECT_EQ(extender_->PostJson("/filter", args),
            (json{{"Nodes", passed},
                  {"NodeNames", nullptr},
                  {"FailedNodes", json::object()},
                  {"FailedAndUnresolvableNodes", unresolvable},
                  {"Error", ""}}));
}

// Slurm 22.05's `scontrol show node -o` for the cluster's nodes, none with a
// feature; any other command fails (the hook runs with --dry-run).
std::string FakeScontrol(const std::string& dir) {
  std::string path = dir + "/scontrol";
  std::ofstream script(path);
  script << "#!/bin/sh\n[ \"$*\" = \"show node -o\" ] || exit 1\n";
  for (const std::string& name : kClusterNodeNames) {
    script << "echo 'NodeName=" << name << " Arch=x86_64 CoresPerSocket=1 CPUAlloc=0 "
           << "CPUEfctv=2 CPUTot=2 CPULoad=0.00 AvailableFeatures=(null) ActiveFeatures=(null) "
           << "Gres=(null) NodeAddr=" << name << " NodeHostName=" << name
           << " Version=22.05.8 OS=Linux RealMemory=1 State=IDLE ThreadsPerCore=1 Weight=1 "
           << "Partitions=debug'\n";
  }
  script.close();
  std::filesystem::permissions(path, std::filesystem::perms::owner_all);
  return path;
}

TEST_F(ExtenderClusterTest, AtTwoReplicasEveryHookScoresTheCacheAlike) {
  // `granary locate`: rack-a holds 3 of 4 files twice over, 3/4 of a complete
  // group; rack-b one file, 1/4.
  json locate = json::parse(RunCli({"locate", "pairs", "--json"}), nullptr, false);
  ASSERT_FALSE(locate.is_discarded());
  EXPECT_EQ(locate["replicas"], 2);
  json groups = json::object();
  for (const json& group : locate["groups"]) groups[group["group"].get<std::string>()] = group;
  EXPECT_EQ(
      groups,
      (json{{"rack-a", {{"group", "rack-a"}, {"cached_bytes", 6 * kMiB}, {"fraction", 0.75}}},
            {"rack-b", {{"group", "rack-b"}, {"cached_bytes", 2 * kMiB}, {"fraction", 0.25}}}}))
      << locate.dump();

  // The extender scores each node by the figures `granary locate` showed.
  std::map<std::string, int> from_locate = {{"gpu-x", 0}};
  for (const json& node : locate["nodes"]) {
    const double group = node["group_fraction"], own = node["node_fraction"];
    EXPECT_DOUBLE_EQ(group, node["group"] == "rack-a" ? 0.75 : 0.25) << node.dump();
    EXPECT_DOUBLE_EQ(own, node["group"] == "rack-a" ? 0.75 : 0.25) << node.dump();
    from_locate[node["node_id"]] =
        static_cast<int>(std::floor(10 * (0.8 * group + 0.2 * own) + 1e-9));
  }
  ASSERT_EQ(from_locate.size(), kClusterNodeNames.size());
  EXPECT_EQ(from_locate["a1"], 7);
  EXPECT_EQ(from_locate["b1"], 2);
  json priorities = json::array();
  for (const std::string& name : kClusterNodeNames) {
    priorities.push_back({{"Host", name}, {"Score", from_locate[name]}});
  }
  json annotations = {{"granary.io/datasets", "pairs"}};
  EXPECT_EQ(extender_->PostJson("/prioritize", ClusterNameArgs(annotations)), priorities);

  // Requiring half of the dataset in the group: the extender keeps rack-a, and
  // the Slurm hook gives rack-a alone the feature at the same share.
  annotations["granary.io/locality"] = "required";
  EXPECT_EQ(extender_->PostJson("/filter", ClusterNameArgs(annotations))["NodeNames"],
            json::array({"a1", "a2"}));
  std::string log = temp_->path() + "/slurm-features.out";
  auto pid = testing::SpawnChild(
      "/usr/bin/env",
      {"GRANARY=" GRANARY_CLI_PATH, "GRANARY_SERVER=" + cluster_->node(1).tcp_address(),
       "GRANARY_TOKEN_FILE=" + *token_file_, "SCONTROL=" + FakeScontrol(temp_->path()),
       "/usr/bin/python3", std::string(GRANARY_SLURM_HOOKS_DIR) + "/granary-slurm-features",
       "--dry-run", "--min-group-share", "0.5"},
      log);
  ASSERT_TRUE(pid.ok()) << pid.status();
  auto exited = testing::WaitForExit(*pid, std::chrono::seconds(60));
  std::ifstream in(log);
  std::string updates(std::istreambuf_iterator<char>(in), {});
  ASSERT_TRUE(exited.has_value() && WIFEXITED(*exited) && WEXITSTATUS(*exited) == 0) << updates;
  std::vector<std::string> featured;
  for (const std::string& name : kClusterNodeNames) {
    if (updates.find("NodeName=" + name + " AvailableFeatures=granary_images,granary_pairs ") !=
        std::string::npos) {
      featured.push_back(name);
    }
  }
  EXPECT_EQ(featured, (std::vector<std::string>{"a1", "a2"})) << updates;
  EXPECT_EQ(updates.find("NodeName=b"), std::string::npos) << updates;
}

TEST_F(ExtenderClusterTest, WithoutTheTokenTheExtenderAnswersNeutrally) {
  ExtenderProcess extender(cluster_->node(3).tcp_address());
  json annotations = {{"granary.io/datasets", "images"}, {"granary.io/locality", "required"}};
  json priorities = json::array();
  for (const std::string& name : kClusterNodeNames) {
    priorities.push_back({{"Host", name}, {"Score", 0}});
  }
  EXPECT_EQ(extender.PostJson("/prioritize", ClusterNameArgs(annotations)), priorities);
  EXPECT_EQ(extender.PostJson("/filter", ClusterNameArgs(annotations))["NodeNames"],
            json(kClusterNodeNames));
  EXPECT_THAT(extender.log(),
              ::testing::ContainsRegex("cannot locate dataset 'images': .*; answering neutrally"));
}

}  // namespace
}  // namespace granary
