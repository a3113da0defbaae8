// The granary-webhook binary over real HTTPS (a certificate made for the test
// by openssl, checked by the client as the API server checks the caBundle)
// against a real granaryd holding real datasets, some partly cached. Reviews
// are shaped like the API server's AdmissionReview v1 for a pod a Job
// creates; each patch is applied to the pod (nlohmann's RFC 6902) and the
// patched pod checked against the Kubernetes API types by deploy's offline
// manifest check (tests/deploy).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "nlohmann/json.hpp"
#include "tests/scheduler_hooks/extender_process.h"
#include "tests/support/child_process.h"
#include "tests/support/granaryd_process.h"
#include "tests/support/suite_setup.h"

namespace granary {
namespace {

using nlohmann::json;
using testing::AddDataset;
using testing::FreeTcpPort;
using testing::GranarydProcess;
using testing::SpawnChild;
using testing::SuiteSetup;
using testing::TempDir;
using testing::WaitForExit;

// Runs `binary` with `args` to its end; its exit code (-1 when it did not
// exit within a minute), its output appended to `log_path`.
int RunToExit(const std::string& binary, const std::vector<std::string>& args,
              const std::string& log_path) {
  absl::StatusOr<pid_t> pid = SpawnChild(binary, args, log_path);
  EXPECT_TRUE(pid.ok()) << pid.status();
  if (!pid.ok()) return -1;
  std::optional<int> status = WaitForExit(*pid, std::chrono::minutes(1));
  if (!status) {
    testing::KillChild(*pid);
    return -1;
  }
  return WIFEXITED(*status) ? WEXITSTATUS(*status) : -1;
}

// Sends `bytes` on a new TCP connection to 127.0.0.1:`port` and returns what
// comes back until the server closes it ("<timeout>" after 10 s).
std::string SendAndReadToClose(int port, const std::string& bytes) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval timeout{.tv_sec = 10, .tv_usec = 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  std::string answer;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(bytes.size())) {
    ::close(fd);
    return "<cannot connect or send>";
  }
  char buffer[4096];
  while (true) {
    ssize_t got = ::recv(fd, buffer, sizeof(buffer), 0);
    if (got < 0 && errno == EAGAIN) answer = "<timeout>";
    if (got <= 0) break;
    answer.append(buffer, static_cast<size_t>(got));
  }
  ::close(fd);
  return answer;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A self-signed certificate for 127.0.0.1 and the webhook's Service name,
// as an administrator (or cert-manager) makes the Secret's.
struct Certificate {
  std::string cert_file;
  std::string key_file;
};

Certificate MakeCertificate(const std::string& dir, const std::string& name) {
  Certificate made{dir + "/" + name + ".crt", dir + "/" + name + ".key"};
  EXPECT_EQ(RunToExit("/usr/bin/openssl",
                      {"req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                       "/CN=granary-webhook.granary.svc", "-addext",
                       "subjectAltName=DNS:granary-webhook.granary.svc,IP:127.0.0.1", "-keyout",
                       made.key_file, "-out", made.cert_file},
                      dir + "/openssl.log"),
            0)
      << ReadAll(dir + "/openssl.log");
  return made;
}

// A running granary-webhook, SIGKILLed by the destructor if still running.
// The constructor returns once /healthz answers over HTTPS.
class WebhookProcess {
 public:
  WebhookProcess(const std::string& server, const Certificate& certificate,
                 std::vector<std::string> extra_args = {})
      : ca_file_(certificate.cert_file) {
    port_ = FreeTcpPort();
    log_path_ = temp_.path() + "/webhook.log";
    std::vector<std::string> args = {"--server",        server,
                                     "--listen",        absl::StrCat("127.0.0.1:", port_),
                                     "--tls-cert-file", certificate.cert_file,
                                     "--tls-key-file",  certificate.key_file};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    absl::StatusOr<pid_t> pid = SpawnChild(GRANARY_TEST_WEBHOOK_PATH, args, log_path_);
    EXPECT_TRUE(pid.ok()) << pid.status();
    if (pid.ok()) pid_ = *pid;
    for (int i = 0; i < 200; ++i) {
      if (auto result = Client()->Get("/healthz"); result && result->status == 200) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ADD_FAILURE() << "granary-webhook did not answer /healthz over HTTPS: " << log();
  }
  ~WebhookProcess() {
    if (pid_ > 0) testing::KillChild(pid_);
  }
  WebhookProcess(const WebhookProcess&) = delete;
  WebhookProcess& operator=(const WebhookProcess&) = delete;

  int port() const { return port_; }
  std::string log() const { return ReadAll(log_path_); }

  // An HTTPS client that trusts the webhook's certificate, as the API server
  // trusts the configuration's caBundle.
  std::unique_ptr<httplib::SSLClient> Client() const {
    auto client = std::make_unique<httplib::SSLClient>("127.0.0.1", port_);
    client->set_ca_cert_path(ca_file_.c_str());
    client->enable_server_certificate_verification(true);
    client->set_connection_timeout(5);
    client->set_read_timeout(30);
    return client;
  }

  // POSTs `body` to /mutate; the HTTP status and body (-1 and the error when
  // no answer came).
  std::pair<int, std::string> Post(const std::string& body) const {
    auto result = Client()->Post("/mutate", body, "application/json");
    if (!result) return {-1, httplib::to_string(result.error())};
    return {result->status, result->body};
  }

  // POSTs `review`, expects 200 and an AdmissionReview; its response.
  json Review(const json& review) const {
    auto [status, body] = Post(review.dump());
    EXPECT_EQ(status, 200) << body;
    json reply = json::parse(body, nullptr, false);
    EXPECT_FALSE(reply.is_discarded()) << body;
    if (reply.is_discarded()) return json::object();
    EXPECT_EQ(reply["apiVersion"], "admission.k8s.io/v1");
    EXPECT_EQ(reply["kind"], "AdmissionReview");
    EXPECT_EQ(reply["response"]["uid"], review["request"]["uid"]);
    EXPECT_EQ(reply["response"]["allowed"], true);
    return reply["response"];
  }

 private:
  TempDir temp_;
  std::string ca_file_;
  std::string log_path_;
  int port_ = 0;
  pid_t pid_ = -1;
};

// A pod as a Job's controller creates it, before defaulting (the API server
// calls mutating webhooks first): no name yet, only its prefix.
json Pod(const json& annotations = json::object(), const json& volumes = json::array()) {
  json pod = json::parse(R"({
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {
      "generateName": "resnet-train-", "namespace": "ml",
      "labels": {"app": "resnet", "job-name": "resnet-train"},
      "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "resnet-train",
        "uid": "9e1c2b3a-0d4f-4e5a-8b6c-7d8e9f0a1b2c", "controller": true,
        "blockOwnerDeletion": true}]
    },
    "spec": {
      "containers": [{"name": "trainer", "image": "registry.example.com/resnet:2.1",
        "command": ["python3", "train.py", "--data", "/data"],
        "resources": {"limits": {"nvidia.com/gpu": "8"}},
        "volumeMounts": [{"name": "data", "readOnly": true, "mountPath": "/data"}]}],
      "restartPolicy": "Never"
    }
  })");
  if (!annotations.empty()) pod["metadata"]["annotations"] = annotations;
  json all_volumes = volumes;
  if (all_volumes.empty()) {
    all_volumes.push_back({{"name", "data"}, {"emptyDir", json::object()}});
  }
  pod["spec"]["volumes"] = all_volumes;
  return pod;
}

// An inline volume of `driver` publishing `dataset`.
json CsiVolume(const std::string& dataset, const std::string& driver = "csi.granary.io") {
  return {{"name", "data"},
          {"csi",
           {{"driver", driver}, {"readOnly", true}, {"volumeAttributes", {{"dataset", dataset}}}}}};
}

json Review(const json& pod, const std::string& operation = "CREATE") {
  return {
      {"apiVersion", "admission.k8s.io/v1"},
      {"kind", "AdmissionReview"},
      {"request",
       {{"uid", "705ab4f5-6393-11e8-b7cc-42010a800002"},
        {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
        {"resource", {{"group", ""}, {"version", "v1"}, {"resource", "pods"}}},
        {"requestKind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
        {"requestResource", {{"group", ""}, {"version", "v1"}, {"resource", "pods"}}},
        {"namespace", "ml"},
        {"operation", operation},
        {"userInfo",
         {{"username", "system:serviceaccount:kube-system:job-controller"},
          {"uid", "b0c1d2e3-f4a5-4b6c-8d7e-9f0a1b2c3d4e"},
          {"groups", json::array({"system:serviceaccounts", "system:authenticated"})}}},
        {"object", pod},
        {"oldObject", nullptr},
        {"dryRun", false},
        {"options",
         {{"kind", "CreateOptions"}, {"apiVersion", "meta.k8s.io/v1"}, {"fieldManager", ""}}}}}};
}

json GroupTerm(int weight, const std::string& group) {
  return {{"weight", weight},
          {"preference",
           {{"matchExpressions", json::array({{{"key", "topology.granary.io/group"},
                                               {"operator", "In"},
                                               {"values", json::array({group})}}})}}}};
}

json NodeTerm(int weight, const std::string& node) {
  return {
      {"weight", weight},
      {"preference",
       {{"matchFields",
         json::array(
             {{{"key", "metadata.name"}, {"operator", "In"}, {"values", json::array({node})}}})}}}};
}

// The JSONPatch of an allowed response, decoded.
json DecodedPatch(const json& response) {
  EXPECT_EQ(response["patchType"], "JSONPatch") << response;
  std::string patch;
  EXPECT_TRUE(absl::Base64Unescape(response["patch"].get<std::string>(), &patch));
  return json::parse(patch);
}

// Checks `pod` as deploy's offline manifest check checks every manifest:
// valid against the v1 Pod schema, with no field the API does not define.
void ExpectValidPod(const json& pod) {
  TempDir dir;
  std::ofstream(dir.path() + "/pod.yaml") << pod.dump(2);
  const std::string log = dir.path() + "/check.log";
  EXPECT_EQ(RunToExit(GRANARY_TEST_NODE, {GRANARY_TEST_MANIFEST_CHECK, dir.path()}, log), 0)
      << ReadAll(log) << pod.dump(2);
}

// One granaryd (node-a in rack-a) holding:
//   half:  a.bin 3 MiB (cached), b.bin 1 MiB  -> 75%
//   full:  c.bin 4 MiB (cached)               -> 100%
//   cold:  d.bin 2 MiB                        -> 0%
// and a webhook over it that prewarms nothing (tests that prewarm start their
// own, on datasets of their own).
class WebhookTest : public ::testing::Test {
 protected:
  static constexpr size_t kMaxBodyBytes = 256 << 10;

  void SetUp() override { ASSERT_NO_FATAL_FAILURE(suite_setup_.RunOnce(Start)); }

  static void Start() {
    dir_ = new TempDir();
    certificate_ = new Certificate(MakeCertificate(dir_->path(), "webhook"));
    testing::GranarydOptions options;
    options.extra_args = {"--node-id", "node-a", "--group", "rack-a"};
    auto server = GranarydProcess::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = server->release();
    AddDataset(*server_, dir_->path(), "half", {{"a.bin", 3}, {"b.bin", 1}}, {"a.bin"});
    AddDataset(*server_, dir_->path(), "full", {{"c.bin", 4}}, {"c.bin"});
    AddDataset(*server_, dir_->path(), "cold", {{"d.bin", 2}}, {});
    webhook_ = new WebhookProcess(server_->socket_address(), *certificate_,
                                  {"--prewarm-groups", "0", "--max-body-bytes",
                                   std::to_string(kMaxBodyBytes), "--max-datasets-per-pod", "3"});
  }
  static void TearDownTestSuite() {
    delete webhook_;
    delete server_;
    delete certificate_;
    delete dir_;
    webhook_ = nullptr;
    server_ = nullptr;
    certificate_ = nullptr;
    dir_ = nullptr;
    suite_setup_ = SuiteSetup();
  }

  // The share of `dataset` that rack-a holds, as granaryd answers Locate.
  static double GroupShare(const std::string& dataset) {
    grpc::ClientContext context;
    v1::LocateRequest request;
    request.set_name(dataset);
    request.set_fresh(true);
    v1::LocateResponse response;
    grpc::Status status = server_->SocketStub()->Locate(&context, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response.groups_size() == 0 ? 0 : response.groups(0).fraction();
  }

  static SuiteSetup suite_setup_;
  static TempDir* dir_;
  static Certificate* certificate_;
  static GranarydProcess* server_;
  static WebhookProcess* webhook_;
};

SuiteSetup WebhookTest::suite_setup_;
TempDir* WebhookTest::dir_ = nullptr;
Certificate* WebhookTest::certificate_ = nullptr;
GranarydProcess* WebhookTest::server_ = nullptr;
WebhookProcess* WebhookTest::webhook_ = nullptr;

TEST_F(WebhookTest, AnnotatedPodPrefersItsCacheGroupAndNodeByCachedShare) {
  const json pod = Pod({{"granary.io/datasets", "half"}});
  json response = webhook_->Review(Review(pod));
  json patch = DecodedPatch(response);
  // G = N = 0.75: weights 0.8 x 75 and 0.2 x 75, summing to 100 x L(n) =
  // 75, the extender's score of 7 for the node on Kubernetes' scale.
  EXPECT_EQ(
      patch,
      json::array({{{"op", "add"},
                    {"path", "/spec/affinity"},
                    {"value",
                     {{"nodeAffinity",
                       {{"preferredDuringSchedulingIgnoredDuringExecution",
                         json::array({GroupTerm(60, "rack-a"), NodeTerm(15, "node-a")})}}}}}}}));
  json patched = pod.patch(patch);
  EXPECT_EQ(patched["spec"]["affinity"]["nodeAffinity"]
                   ["preferredDuringSchedulingIgnoredDuringExecution"][0]["weight"],
            60);
  ExpectValidPod(patched);
  EXPECT_THAT(webhook_->log(),
              ::testing::HasSubstr("pod ml/resnet-train-* reads half: 2 preferred node affinity "
                                   "terms"));
}

TEST_F(WebhookTest, CsiVolumePodWithPodAffinityGetsNodeAffinityBesideIt) {
  json pod = Pod(json::object(), json::array({CsiVolume("full")}));
  pod["spec"]["affinity"] = json::parse(R"({"podAntiAffinity": {
      "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 10, "podAffinityTerm": {
        "labelSelector": {"matchLabels": {"app": "resnet"}},
        "topologyKey": "kubernetes.io/hostname"}}]}})");
  json patch = DecodedPatch(webhook_->Review(Review(pod)));
  EXPECT_EQ(patch,
            json::array({{{"op", "add"},
                          {"path", "/spec/affinity/nodeAffinity"},
                          {"value",
                           {{"preferredDuringSchedulingIgnoredDuringExecution",
                             json::array({GroupTerm(80, "rack-a"), NodeTerm(20, "node-a")})}}}}}));
  json patched = pod.patch(patch);
  EXPECT_EQ(patched["spec"]["affinity"]["podAntiAffinity"],
            pod["spec"]["affinity"]["podAntiAffinity"]);
  ExpectValidPod(patched);
}

TEST_F(WebhookTest, VolumesAndAnnotationAreWeighedByBytes) {
  // (4 + 3) MiB cached of (4 + 4): G = N = 0.875.
  json pod = Pod({{"granary.io/datasets", "half"}}, json::array({CsiVolume("full")}));
  json patch = DecodedPatch(webhook_->Review(Review(pod)));
  EXPECT_EQ(patch[0]["value"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"],
            json::array({GroupTerm(70, "rack-a"), NodeTerm(18, "node-a")}));
  ExpectValidPod(pod.patch(patch));
}

TEST_F(WebhookTest, PodsWithoutCachedGranaryDatasetsAreUntouched) {
  const json unpatched = {{"uid", "705ab4f5-6393-11e8-b7cc-42010a800002"}, {"allowed", true}};
  // No Granary volume or annotation.
  EXPECT_EQ(webhook_->Review(Review(Pod())), unpatched);
  // Another driver's CSI volume naming a dataset attribute.
  EXPECT_EQ(webhook_->Review(
                Review(Pod(json::object(), json::array({CsiVolume("half", "csi.example.com")})))),
            unpatched);
  // A dataset the cluster does not know, and one no cache holds yet.
  EXPECT_EQ(webhook_->Review(Review(Pod({{"granary.io/datasets", "no-such-dataset"}}))), unpatched);
  EXPECT_EQ(webhook_->Review(Review(Pod({{"granary.io/datasets", "cold"}}))), unpatched);
  EXPECT_THAT(webhook_->log(), ::testing::HasSubstr("admitted without node affinity: no cache "
                                                    "holds cold yet"));
  // Not a creation, or not a pod.
  EXPECT_EQ(webhook_->Review(Review(Pod({{"granary.io/datasets", "half"}}), "UPDATE")), unpatched);
  json deployment = Review(Pod({{"granary.io/datasets", "half"}}));
  deployment["request"]["kind"] = {{"group", "apps"}, {"version", "v1"}, {"kind", "Deployment"}};
  EXPECT_EQ(webhook_->Review(deployment), unpatched);
}

TEST_F(WebhookTest, PodWithItsOwnNodeAffinityIsLeftAlone) {
  json pod = Pod({{"granary.io/datasets", "full"}});
  pod["spec"]["affinity"] = json::parse(R"({"nodeAffinity": {
      "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["h100"]}]}]}}})");
  EXPECT_EQ(webhook_->Review(Review(pod)),
            (json{{"uid", "705ab4f5-6393-11e8-b7cc-42010a800002"}, {"allowed", true}}));
  EXPECT_THAT(webhook_->log(),
              ::testing::HasSubstr("pod ml/resnet-train-* sets its own node affinity"));
}

TEST_F(WebhookTest, PodNamingTooManyDatasetsIsAdmittedUnchanged) {
  EXPECT_EQ(webhook_->Review(Review(Pod({{"granary.io/datasets", "a, b, c, d"}}))),
            (json{{"uid", "705ab4f5-6393-11e8-b7cc-42010a800002"}, {"allowed", true}}));
  EXPECT_THAT(webhook_->log(),
              ::testing::HasSubstr("admitted without node affinity: the pod names 4 datasets"));
}

TEST_F(WebhookTest, ReviewsThatAreNotAdmissionReviewV1AreRefused) {
  json review = Review(Pod({{"granary.io/datasets", "half"}}));
  std::string nested(2000, '[');
  nested += std::string(2000, ']');
  json v1beta1 = review;
  v1beta1["apiVersion"] = "admission.k8s.io/v1beta1";
  json other_kind = review;
  other_kind["kind"] = "TokenReview";
  json no_request = review;
  no_request.erase("request");
  json no_uid = review;
  no_uid["request"].erase("uid");
  json no_pod = review;
  no_pod["request"]["object"] = "pod";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{\"apiVersion\": \"admission.k8s.io/v1\", ",
       "request body is not a JSON AdmissionReview object"},
      {"[]", "request body is not a JSON AdmissionReview object"},
      {nested, "request body nests deeper than 512 levels"},
      {v1beta1.dump(),
       "AdmissionReview apiVersion is 'admission.k8s.io/v1beta1'; this webhook speaks "
       "admission.k8s.io/v1 (admissionReviewVersions: [v1])"},
      {other_kind.dump(), "request body is a 'TokenReview', not an AdmissionReview"},
      {no_request.dump(), "AdmissionReview has no request object"},
      {no_uid.dump(), "AdmissionReview.request has no uid"},
      {no_pod.dump(), "AdmissionReview.request.object is not a Pod with a spec"},
  };
  for (const auto& [body, message] : cases) {
    EXPECT_EQ(webhook_->Post(body), std::make_pair(400, message + "\n")) << body.substr(0, 80);
  }
  EXPECT_THAT(webhook_->log(),
              ::testing::HasSubstr("review refused: AdmissionReview.request has no uid"));
  // The webhook goes on serving.
  EXPECT_TRUE(DecodedPatch(webhook_->Review(review)).is_array());
}

TEST_F(WebhookTest, OversizedReviewIsRefusedBeforeItIsRead) {
  json review = Review(Pod(
      {{"granary.io/datasets", "half"}, {"example.com/padding", std::string(kMaxBodyBytes, 'x')}}));
  auto [status, body] = webhook_->Post(review.dump());
  EXPECT_EQ(status, 413);
  EXPECT_THAT(body, ::testing::HasSubstr(std::to_string(kMaxBodyBytes)));

  // Just under the limit, the review spans a dozen TLS records and is read
  // whole.
  json large = Review(Pod({{"granary.io/datasets", "half"},
                           {"example.com/padding", std::string(kMaxBodyBytes - 4096, 'x')}}));
  EXPECT_EQ(DecodedPatch(webhook_->Review(large))[0]["path"], "/spec/affinity");
}

TEST_F(WebhookTest, ClientsWithoutTlsOrTrustGetNoReview) {
  // Plain HTTP to the HTTPS port: told so, in plain text.
  httplib::Client plain("127.0.0.1", webhook_->port());
  auto result = plain.Post("/mutate", Review(Pod()).dump(), "application/json");
  ASSERT_TRUE(result) << httplib::to_string(result.error());
  EXPECT_EQ(result->status, 400);
  EXPECT_EQ(result->body, "this port speaks HTTPS; the request came as plain HTTP\n");

  // A client that does not trust the certificate stops at the handshake.
  TempDir other;
  Certificate stranger = MakeCertificate(other.path(), "stranger");
  httplib::SSLClient untrusting("127.0.0.1", webhook_->port());
  untrusting.set_ca_cert_path(stranger.cert_file.c_str());
  untrusting.enable_server_certificate_verification(true);
  auto refused = untrusting.Post("/mutate", Review(Pod()).dump(), "application/json");
  EXPECT_FALSE(refused);
  EXPECT_EQ(refused.error(), httplib::Error::SSLServerVerification);

  // A TLS record that is no handshake: a fatal TLS alert, and the
  // connection is closed.
  const std::string answer =
      SendAndReadToClose(webhook_->port(), std::string("\x16\x03\x01\x00\x05hello", 10));
  EXPECT_EQ(answer.substr(0, 1), "\x15") << answer;

  EXPECT_THAT(webhook_->log(), ::testing::HasSubstr("TLS handshake with an HTTPS client failed"));
  EXPECT_TRUE(
      DecodedPatch(webhook_->Review(Review(Pod({{"granary.io/datasets", "half"}})))).is_array());
}

TEST_F(WebhookTest, AdmittedPodPrewarmsTheGroupItPrefersButADryRunDoesNot) {
  AddDataset(*server_, dir_->path(), "warmable", {{"w1.bin", 2}, {"w2.bin", 2}}, {"w1.bin"});
  AddDataset(*server_, dir_->path(), "dry", {{"y1.bin", 2}, {"y2.bin", 2}}, {"y1.bin"});
  WebhookProcess prewarming(server_->socket_address(), *certificate_);

  json dry_run = Review(Pod({{"granary.io/datasets", "dry"}}));
  dry_run["request"]["dryRun"] = true;
  EXPECT_TRUE(DecodedPatch(prewarming.Review(dry_run)).is_array());
  json patch = DecodedPatch(prewarming.Review(Review(Pod({{"granary.io/datasets", "warmable"}}))));
  EXPECT_EQ(patch[0]["value"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"],
            json::array({GroupTerm(40, "rack-a"), NodeTerm(10, "node-a")}));

  // The prewarm runs behind the answer; rack-a comes to hold all of it.
  for (int i = 0; i < 300 && GroupShare("warmable") < 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(GroupShare("warmable"), 1) << prewarming.log();
  EXPECT_THAT(prewarming.log(),
              ::testing::HasSubstr("prewarmed dataset 'warmable' onto group 'rack-a' for an "
                                   "admitted pod"));
  // One queue warms in order: a prewarm of the dry run's dataset would have
  // run first.
  EXPECT_EQ(GroupShare("dry"), 0.5);
  EXPECT_THAT(prewarming.log(), ::testing::Not(::testing::HasSubstr("dataset 'dry' onto")));
}

TEST_F(WebhookTest, GranarydDownAdmitsPodsWithoutPatchAndSaysSo) {
  WebhookProcess orphan("unix:" + dir_->path() + "/no-granaryd.sock", *certificate_);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(orphan.Review(Review(Pod({{"granary.io/datasets", "half"}}))),
            (json{{"uid", "705ab4f5-6393-11e8-b7cc-42010a800002"}, {"allowed", true}}));
  // Within the Locate deadline, well inside the configuration's 5 s timeout.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(4));
  EXPECT_THAT(orphan.log(), ::testing::HasSubstr("pod ml/resnet-train-* admitted without node "
                                                 "affinity: cannot locate dataset 'half': "));
}

TEST(WebhookStartTest, RefusesToStartWithoutAUsableCertificate) {
  TempDir dir;
  Certificate good = MakeCertificate(dir.path(), "good");
  Certificate other = MakeCertificate(dir.path(), "other");
  std::ofstream(dir.path() + "/not.pem") << "not a certificate\n";
  const std::string log = dir.path() + "/webhook.log";
  auto run = [&](std::vector<std::string> args) {
    std::ofstream(log, std::ios::trunc).close();
    args.insert(args.begin(), {"--listen", absl::StrCat("127.0.0.1:", FreeTcpPort())});
    const int code = RunToExit(GRANARY_TEST_WEBHOOK_PATH, args, log);
    return std::make_pair(code, ReadAll(log));
  };
  auto [code, output] = run({"--tls-key-file", good.key_file});
  EXPECT_EQ(code, 2);
  EXPECT_THAT(output, ::testing::HasSubstr("--tls-cert-file is required"));
  std::tie(code, output) =
      run({"--tls-cert-file", dir.path() + "/not.pem", "--tls-key-file", good.key_file});
  EXPECT_EQ(code, 1);
  EXPECT_THAT(output, ::testing::HasSubstr("cannot load the TLS certificate chain " + dir.path() +
                                           "/not.pem"));
  std::tie(code, output) =
      run({"--tls-cert-file", good.cert_file, "--tls-key-file", other.key_file});
  EXPECT_EQ(code, 1);
  EXPECT_THAT(output, ::testing::HasSubstr("cannot load the TLS private key " + other.key_file +
                                           " of the certificate " + good.cert_file +
                                           ": error:05800074:x509 certificate routines::key "
                                           "values mismatch"));
}

}  // namespace
}  // namespace granary
