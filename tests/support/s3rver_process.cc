#include "tests/support/s3rver_process.h"

#include <curl/curl.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/base/file_util.h"
#include "common/source_access/s3_location.h"
#include "source/s3_client.h"
#include "tests/support/child_process.h"

namespace granary::testing {
namespace {

constexpr char kNode[] = "/usr/bin/node";

size_t Discard(char*, size_t size, size_t count, void*) { return size * count; }

}  // namespace

absl::StatusOr<std::unique_ptr<S3rverProcess>> S3rverProcess::Start(
    const std::vector<std::string>& buckets) {
  const std::string script = GRANARY_TEST_S3RVER_DIR "/node_modules/s3rver/bin/s3rver.js";
  if (::access(kNode, X_OK) != 0 || ::access(script.c_str(), R_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("s3rver is not installed (", script,
                     " or /usr/bin/node is missing); run scripts/install-deps.sh"));
  }
  std::unique_ptr<S3rverProcess> s3rver(new S3rverProcess());
  s3rver->port_ = FreeTcpPort();
  std::vector<std::string> args = {"--openssl-legacy-provider",
                                   script,
                                   "--directory",
                                   s3rver->temp_.path() + "/data",
                                   "--address",
                                   "127.0.0.1",
                                   "--port",
                                   absl::StrCat(s3rver->port_),
                                   "--silent"};
  for (const std::string& bucket : buckets) {
    args.push_back("--configure-bucket");
    args.push_back(bucket);
  }
  std::filesystem::create_directories(s3rver->temp_.path() + "/data");
  auto pid = SpawnChild(kNode, args, s3rver->temp_.path() + "/s3rver.log");
  if (!pid.ok()) return pid.status();
  s3rver->pid_ = *pid;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!TcpPortAcceptsConnections(s3rver->port_)) {
    if (WaitForExit(s3rver->pid_, std::chrono::milliseconds(20)).has_value()) {
      s3rver->pid_ = -1;
      return absl::UnavailableError(absl::StrCat("s3rver exited at startup:\n", s3rver->log()));
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return absl::UnavailableError(
          absl::StrCat("s3rver did not listen within 30 s:\n", s3rver->log()));
    }
  }
  return s3rver;
}

S3rverProcess::~S3rverProcess() {
  if (curl_ != nullptr) curl_easy_cleanup(static_cast<CURL*>(curl_));
  KillChild(pid_);
}

std::string S3rverProcess::endpoint() const { return absl::StrCat("http://127.0.0.1:", port_); }

std::string S3rverProcess::log() const {
  return ReadFileToString(temp_.path() + "/s3rver.log", "s3rver log").value_or("");
}

absl::Status S3rverProcess::Put(std::string_view bucket, std::string_view key,
                                std::string_view bytes) const {
  return Send("PUT", bucket, key, bytes);
}

absl::Status S3rverProcess::Remove(std::string_view bucket, std::string_view key) const {
  return Send("DELETE", bucket, key, "");
}

absl::Status S3rverProcess::Send(const char* method, std::string_view bucket, std::string_view key,
                                 std::string_view bytes) const {
  S3Location location;
  location.bucket = std::string(bucket);
  location.endpoint = endpoint();
  const std::string url = S3RequestUrl(location, key);
  if (curl_ == nullptr) curl_ = curl_easy_init();
  CURL* curl = static_cast<CURL*>(curl_);
  curl_easy_reset(curl);
  curl_slist* headers = curl_slist_append(nullptr, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method);
  curl_easy_setopt(curl, CURLOPT_PATH_AS_IS, 1L);
  curl_easy_setopt(curl, CURLOPT_AWS_SIGV4, "aws:amz:us-east-1:s3");
  curl_easy_setopt(curl, CURLOPT_USERNAME, kS3rverKey);
  curl_easy_setopt(curl, CURLOPT_PASSWORD, kS3rverSecret);
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &Discard);
  if (std::string_view(method) == "PUT") {
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, bytes.data());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(bytes.size()));
  }
  CURLcode code = curl_easy_perform(curl);
  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  curl_slist_free_all(headers);
  if (code != CURLE_OK) {
    return absl::UnavailableError(absl::StrCat(method, " ", url, ": ", curl_easy_strerror(code)));
  }
  if (status / 100 != 2) {
    return absl::InternalError(absl::StrCat(method, " ", url, " answered HTTP ", status));
  }
  return absl::OkStatus();
}

}  // namespace granary::testing
