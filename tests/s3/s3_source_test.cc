// S3 datasets end to end: a real s3rver behind a front end that checks
// SigV4 signatures and If-Match as S3 does (tests/support/sigv4_front_end.h),
// a real granaryd reading it, and a real mount: registration by
// ListObjectsV2 across pages, keys mapped to a tree (and those that cannot
// be one listed as skipped), ranged reads, and the clear errors of objects
// changed or deleted since, of wrong or missing credentials, and of
// endpoints that are down, stalled, slowing requests down (503 SlowDown,
// retried) or not allowed; and a mount that reads
// the bucket itself once its granaryd is gone.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/source_access/s3_location.h"
#include "tests/fuse/fuse_mount.h"
#include "tests/server/server_test_util.h"
#include "tests/support/granaryd_process.h"
#include "tests/support/s3_test_endpoint.h"
#include "tests/support/silent_listener.h"

namespace granary::testing {
namespace {

using ::testing::HasSubstr;

constexpr char kBucket[] = "data";
constexpr uint32_t kChunkSize = 1 << 20;

int PortOf(const std::string& endpoint) {
  return std::stoi(endpoint.substr(endpoint.rfind(':') + 1));
}

std::string SourceOf(const std::string& endpoint, const std::string& prefix) {
  return S3SourceOf(kBucket, endpoint, prefix);
}

// Sets environment variables of this process (and so of the granary-fuse it
// starts) while it lives, and puts back what they were.
class ScopedEnvironment {
 public:
  explicit ScopedEnvironment(const std::map<std::string, std::optional<std::string>>& values) {
    for (const auto& [name, value] : values) {
      const char* before = std::getenv(name.c_str());
      before_[name] = before ? std::optional<std::string>(before) : std::nullopt;
      Set(name, value);
    }
  }
  ~ScopedEnvironment() {
    for (const auto& [name, value] : before_) Set(name, value);
  }
  ScopedEnvironment(const ScopedEnvironment&) = delete;
  ScopedEnvironment& operator=(const ScopedEnvironment&) = delete;

 private:
  static void Set(const std::string& name, const std::optional<std::string>& value) {
    if (value) {
      ::setenv(name.c_str(), value->c_str(), 1);
    } else {
      ::unsetenv(name.c_str());
    }
  }
  std::map<std::string, std::optional<std::string>> before_;
};

// The bytes of `path` read with read(2), or the errno that failed them.
struct FileRead {
  std::string bytes;
  int error = 0;
};
FileRead ReadWhole(const std::string& path) {
  FileRead result;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {.bytes = {}, .error = errno};
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0) {
      result.error = errno;
      break;
    }
    if (n == 0) break;
    result.bytes.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  return result;
}

class S3SourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s3 = StartVerifiedS3rver({kBucket});
    ASSERT_TRUE(s3.ok()) << s3.status();
    s3rver_ = std::move(s3->s3rver);
    front_ = std::move(s3->front);
  }

  // Where granaryd reaches the bucket: through the verifying front end.
  std::string endpoint() const { return front_->endpoint(); }

  // granaryd allowed to register from `endpoint`, with `environment` (NAME=value).
  void StartServer(const std::string& endpoint,
                   const std::vector<std::string>& environment = S3rverKeysEnvironment()) {
    GranarydOptions options;
    options.extra_args = {"--s3-endpoint", endpoint};
    options.extra_args.insert(options.extra_args.end(), extra_server_args_.begin(),
                              extra_server_args_.end());
    options.command_prefix = GranarydS3CommandPrefix(home_.path(), environment);
    auto server = GranarydProcess::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    stub_ = server_->SocketStub();
  }

  // ~/.aws/credentials of granaryd's HOME: `sections`, the last of them
  // holding s3rver's keys.
  void WriteSharedCredentials(const std::string& sections) {
    std::filesystem::create_directories(home_.path() + "/.aws");
    std::ofstream(home_.path() + "/.aws/credentials")
        << sections << "aws_access_key_id = " << kS3rverKey
        << "\naws_secret_access_key = " << kS3rverSecret << "\n";
  }

  void Put(const std::string& key, const std::string& bytes) {
    absl::Status put = s3rver_->Put(kBucket, key, bytes);
    ASSERT_TRUE(put.ok()) << put;
  }

  // The files of the current version of `name`, by path.
  std::map<std::string, v1::ManifestEntry> Files(const std::string& name,
                                                 v1::DatasetInfo* info = nullptr) {
    std::vector<v1::ManifestEntry> entries;
    grpc::Status status = GetManifest(stub_.get(), name, 0, &entries, info);
    EXPECT_TRUE(status.ok()) << status.error_message();
    std::map<std::string, v1::ManifestEntry> files;
    for (size_t id = 0; id < entries.size(); ++id) {
      if (entries[id].type() == v1::ENTRY_TYPE_FILE) files[entries[id].path()] = entries[id];
    }
    return files;
  }

  // The id of `path` in the current manifest of `name`.
  uint64_t FileId(const std::string& name, const std::string& path, v1::DatasetInfo* info) {
    std::vector<v1::ManifestEntry> entries;
    EXPECT_TRUE(GetManifest(stub_.get(), name, 0, &entries, info).ok());
    for (size_t id = 0; id < entries.size(); ++id) {
      if (entries[id].path() == path) return id;
    }
    ADD_FAILURE() << "no " << path << " in " << name;
    return 0;
  }

  std::vector<std::string> extra_server_args_;  // For StartServer(), after --s3-endpoint.
  TempDir home_;
  std::unique_ptr<S3rverProcess> s3rver_;
  std::unique_ptr<SigV4FrontEnd> front_;
  std::unique_ptr<GranarydProcess> server_;
  std::unique_ptr<v1::Granary::Stub> stub_;
};

TEST_F(S3SourceTest, RegistersThousandsOfKeysAcrossPagesAsATree) {
  constexpr int kKeys = 2500;
  for (int i = 0; i < kKeys; ++i) {
    Put(absl::StrCat("train/shard", i % 7, "/class", i % 3, "/", i, ".jpg"),
        absl::StrCat("image ", i));
  }
  Put("train/empty.bin", "");
  Put("outside/not-listed.bin", "not under the prefix");
  StartServer(endpoint());
  v1::DatasetInfo info;
  grpc::Status added =
      AddDataset(stub_.get(), "train", SourceOf(endpoint(), "train"), kChunkSize, &info);
  ASSERT_TRUE(added.ok()) << added.error_message() << "\n" << server_->log();
  EXPECT_EQ(info.file_count(), kKeys + 1);
  EXPECT_EQ(info.directory_count(), 1 + 7 + 7 * 3);  // The root, shards, classes.
  EXPECT_EQ(info.skipped_count(), 0);
  std::map<std::string, v1::ManifestEntry> files = Files("train");
  ASSERT_EQ(files.size(), kKeys + 1);
  EXPECT_EQ(files["empty.bin"].size(), 0);
  EXPECT_EQ(files["shard2/class1/1234.jpg"].size(), std::string("image 1234").size());
  EXPECT_FALSE(files["shard2/class1/1234.jpg"].etag().empty());
  const uint64_t id = FileId("train", "shard2/class1/1234.jpg", &info);
  ReadResult read = ReadChunk(stub_.get(), info.version(), id, 0);
  ASSERT_TRUE(read.status.ok()) << read.status.error_message();
  EXPECT_EQ(read.data, "image 1234");
  EXPECT_EQ(front_->signature_refusals(), 0);  // Continuation tokens signed too.
}

TEST_F(S3SourceTest, OddKeysAreServedAndKeysThatCannotBePathsAreListedAsSkipped) {
  const std::vector<std::string> odd = {"with space.txt", "plus+sign",    "per%cent",
                                        "ünïcödé.txt",    "q?mark&amp=1", "tilde~(paren)*!'",
                                        "hash#tag"};
  for (const std::string& key : odd) Put("odd/" + key, "bytes of " + key);
  Put("odd/a", "a file that is also a prefix");
  Put("odd/a/b", "inside a");
  // s3rver refuses keys with "//" or "." components and dies of names over
  // 255 bytes; s3_unit_test maps such keys.
  StartServer(endpoint());
  v1::DatasetInfo info;
  grpc::Status added =
      AddDataset(stub_.get(), "odd", SourceOf(endpoint(), "odd"), kChunkSize, &info);
  ASSERT_TRUE(added.ok()) << added.error_message();
  for (const std::string& key : odd) {
    ReadResult read = ReadChunk(stub_.get(), info.version(), FileId("odd", key, &info), 0);
    ASSERT_TRUE(read.status.ok()) << key << ": " << read.status.error_message();
    EXPECT_EQ(read.data, "bytes of " + key);
  }
  EXPECT_EQ(Files("odd")["a/b"].size(), std::string("inside a").size());
  EXPECT_EQ(front_->signature_refusals(), 0);
  std::map<std::string, std::string> skipped;
  for (const v1::SkippedEntry& entry : info.skipped()) skipped[entry.path()] = entry.reason();
  EXPECT_EQ(info.skipped_count(), 1);
  EXPECT_THAT(skipped["odd/a"], HasSubstr("both an object and the prefix"));
}

TEST_F(S3SourceTest, AnOverwrittenObjectIsStaleUntilRefreshMakesANewVersion) {
  Put("set/sample.bin", PatternBytes(3 * kChunkSize, 1));
  StartServer(endpoint());
  v1::DatasetInfo info;
  ASSERT_TRUE(AddDataset(stub_.get(), "set", SourceOf(endpoint(), "set"), kChunkSize, &info).ok());
  const uint64_t id = FileId("set", "sample.bin", &info);
  ReadResult first = ReadChunk(stub_.get(), info.version(), id, 0);
  ASSERT_TRUE(first.status.ok()) << first.status.error_message();
  Put("set/sample.bin", PatternBytes(3 * kChunkSize, 2));  // Same size, other bytes.
  ReadResult stale = ReadChunk(stub_.get(), info.version(), id, 1);
  EXPECT_EQ(stale.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(stale.status.error_message(), HasSubstr("changed since it was registered"));
  EXPECT_THAT(stale.status.error_message(), HasSubstr("set/sample.bin"));
  EXPECT_THAT(stale.status.error_message(), HasSubstr("HTTP 412"));
  EXPECT_GT(front_->precondition_failures(), 0);

  grpc::ClientContext context;
  v1::RefreshDatasetRequest refresh;
  refresh.set_name("set");
  v1::DatasetInfo refreshed;
  ASSERT_TRUE(stub_->RefreshDataset(&context, refresh, &refreshed).ok());
  EXPECT_NE(refreshed.version(), info.version());
  ReadResult fresh = ReadChunk(stub_.get(), refreshed.version(), id, 1);
  ASSERT_TRUE(fresh.status.ok()) << fresh.status.error_message();
  EXPECT_EQ(fresh.data, PatternBytes(3 * kChunkSize, 2).substr(kChunkSize, kChunkSize));
}

TEST_F(S3SourceTest, ADeletedObjectFailsItsReadsByName) {
  Put("gone/file.bin", "soon deleted");
  StartServer(endpoint());
  v1::DatasetInfo info;
  ASSERT_TRUE(
      AddDataset(stub_.get(), "gone", SourceOf(endpoint(), "gone"), kChunkSize, &info).ok());
  ASSERT_TRUE(s3rver_->Remove(kBucket, "gone/file.bin").ok());
  ReadResult read = ReadChunk(stub_.get(), info.version(), FileId("gone", "file.bin", &info), 0);
  EXPECT_EQ(read.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(read.status.error_message(), HasSubstr("gone since it was registered"));
  EXPECT_THAT(read.status.error_message(), HasSubstr("gone/file.bin"));
}

TEST_F(S3SourceTest, ALargeObjectReadsRightAtRandomOffsets) {
  constexpr size_t kSize = 300u << 20;
  const std::string bytes = PatternBytes(kSize, 7);
  Put("big/blob.bin", bytes);
  StartServer(endpoint());
  v1::DatasetInfo info;
  ASSERT_TRUE(AddDataset(stub_.get(), "big", SourceOf(endpoint(), "big"), kChunkSize, &info).ok());
  const uint64_t id = FileId("big", "blob.bin", &info);
  std::mt19937 random(20);
  for (int i = 0; i < 12; ++i) {
    const uint32_t chunk =
        std::uniform_int_distribution<uint32_t>(0, kSize / kChunkSize - 1)(random);
    const uint32_t offset = std::uniform_int_distribution<uint32_t>(0, kChunkSize - 4096)(random);
    ReadResult read = ReadChunk(stub_.get(), info.version(), id, chunk, offset, 4096);
    ASSERT_TRUE(read.status.ok()) << read.status.error_message();
    EXPECT_EQ(read.data, bytes.substr(uint64_t{chunk} * kChunkSize + offset, 4096)) << chunk;
  }
}

TEST_F(S3SourceTest, ADownEndpointFailsRegistrationNamingIt) {
  const std::string down = absl::StrCat("http://127.0.0.1:", FreeTcpPort());
  StartServer(down);
  v1::DatasetInfo info;
  grpc::Status added = AddDataset(stub_.get(), "down", SourceOf(down, ""), kChunkSize, &info);
  EXPECT_EQ(added.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(added.error_message(), HasSubstr(down));
  EXPECT_THAT(added.error_message(), HasSubstr("attempts"));
}

TEST_F(S3SourceTest, AStalledEndpointFailsReadsAndRegistrationsAtItsDeadlineAndOthersAreServed) {
  constexpr int kAttempts = 4;  // S3Client's retries.
  constexpr auto kRequestTimeout = std::chrono::milliseconds(500);
  // The stalled endpoint is a second s3rver (which checks no signature), stopped
  // once the dataset is registered from it and replaced by a listener on its port.
  auto stalled_s3rver = S3rverProcess::Start({kBucket});
  ASSERT_TRUE(stalled_s3rver.ok()) << stalled_s3rver.status();
  ASSERT_TRUE((*stalled_s3rver)->Put(kBucket, "stalled/a.bin", "bytes of a").ok());
  const std::string stalled = (*stalled_s3rver)->endpoint();
  Put("other/b.bin", "bytes of b");
  extra_server_args_ = {"--s3-endpoint", stalled, "--s3-request-timeout-ms",
                        std::to_string(kRequestTimeout.count())};
  StartServer(endpoint());
  v1::DatasetInfo info;
  grpc::Status added =
      AddDataset(stub_.get(), "stalled", SourceOf(stalled, "stalled"), kChunkSize, &info);
  ASSERT_TRUE(added.ok()) << added.error_message();
  const uint64_t id = FileId("stalled", "a.bin", &info);

  stalled_s3rver->reset();
  SilentListener silent(PortOf(stalled));
  ASSERT_TRUE(silent.listening());
  const auto start = std::chrono::steady_clock::now();
  std::future<ReadResult> stalled_read = std::async(std::launch::async, [&] {
    auto stub = server_->SocketStub();
    return ReadChunk(stub.get(), info.version(), id, 0);
  });

  v1::DatasetInfo other_info;
  added = AddDataset(stub_.get(), "other", SourceOf(endpoint(), "other"), kChunkSize, &other_info);
  ASSERT_TRUE(added.ok()) << added.error_message();
  ReadResult read =
      ReadChunk(stub_.get(), other_info.version(), FileId("other", "b.bin", &other_info), 0);
  ASSERT_TRUE(read.status.ok()) << read.status.error_message();
  EXPECT_EQ(read.data, "bytes of b");
  EXPECT_EQ(stalled_read.wait_for(std::chrono::seconds(0)), std::future_status::timeout)
      << "the other dataset was served only after the stalled read ended";

  read = stalled_read.get();
  const auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(read.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_THAT(read.status.error_message(), HasSubstr(stalled));
  EXPECT_THAT(read.status.error_message(), HasSubstr("after 4 attempts"));
  EXPECT_GE(elapsed, kAttempts * kRequestTimeout);
  EXPECT_LT(elapsed, 3 * kAttempts * kRequestTimeout);
  EXPECT_LE(silent.connections(), kAttempts);

  const int before = silent.connections();
  added = AddDataset(stub_.get(), "stalled-again", SourceOf(stalled, "stalled"), kChunkSize, &info);
  EXPECT_EQ(added.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_THAT(added.error_message(), HasSubstr(stalled));
  EXPECT_THAT(added.error_message(),
              HasSubstr(absl::StrCat("no complete reply within ", kRequestTimeout.count(), " ms")));
  EXPECT_LE(silent.connections() - before, kAttempts);
}

TEST_F(S3SourceTest, ReadsAnsweredSlowDownAreRetriedUntilTheyAreServed) {
  Put("slow/a.bin", "bytes of a");
  StartServer(endpoint());
  v1::DatasetInfo info;
  ASSERT_TRUE(
      AddDataset(stub_.get(), "slow", SourceOf(endpoint(), "slow"), kChunkSize, &info).ok());
  front_->FailNext(SigV4FrontEnd::Requests::kObjectGets, 2, 503, "SlowDown");
  ReadResult read = ReadChunk(stub_.get(), info.version(), FileId("slow", "a.bin", &info), 0);
  ASSERT_TRUE(read.status.ok()) << read.status.error_message() << "\n" << server_->log();
  EXPECT_EQ(read.data, "bytes of a");
  EXPECT_EQ(front_->failed_gets(), 2);
  EXPECT_EQ(front_->object_gets(), 1);
  const std::string log = server_->log();
  EXPECT_THAT(log,
              HasSubstr(absl::StrCat("S3 endpoint ", endpoint(),
                                     " (GET s3://data/slow/a.bin) answered HTTP 503 (SlowDown: ")));
  EXPECT_THAT(log, HasSubstr("retrying, attempt 2 of 4"));
  EXPECT_THAT(log, HasSubstr("retrying, attempt 3 of 4"));
  EXPECT_THAT(log, ::testing::Not(HasSubstr("retrying, attempt 4 of 4")));
}

TEST_F(S3SourceTest, AReadStillAnsweredSlowDownAfterItsAttemptsFailsNamingThemAndOthersAreServed) {
  constexpr int kAttempts = 4;  // S3Client's.
  Put("slow/a.bin", "bytes of a");
  Put("slow/b.bin", "bytes of b");
  StartServer(endpoint());
  v1::DatasetInfo info;
  ASSERT_TRUE(
      AddDataset(stub_.get(), "slow", SourceOf(endpoint(), "slow"), kChunkSize, &info).ok());
  const uint64_t a = FileId("slow", "a.bin", &info);
  front_->FailNext(SigV4FrontEnd::Requests::kObjectGets, 2 * kAttempts, 503, "SlowDown");
  ReadResult read = ReadChunk(stub_.get(), info.version(), a, 0);
  EXPECT_EQ(read.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(read.status.error_message(), HasSubstr(endpoint()));
  EXPECT_THAT(read.status.error_message(), HasSubstr("slow/a.bin"));
  EXPECT_THAT(read.status.error_message(), HasSubstr("HTTP 503 (SlowDown"));
  EXPECT_THAT(read.status.error_message(),
              HasSubstr(absl::StrCat("after ", kAttempts, " attempts")));
  EXPECT_EQ(front_->failed_gets(), kAttempts);
  EXPECT_EQ(front_->object_gets(), 0);

  front_->FailNext(SigV4FrontEnd::Requests::kObjectGets, 0, 503, "SlowDown");
  read = ReadChunk(stub_.get(), info.version(), FileId("slow", "b.bin", &info), 0);
  ASSERT_TRUE(read.status.ok()) << read.status.error_message();
  EXPECT_EQ(read.data, "bytes of b");
  read = ReadChunk(stub_.get(), info.version(), a, 0);
  ASSERT_TRUE(read.status.ok()) << read.status.error_message();
  EXPECT_EQ(read.data, "bytes of a");
}

TEST_F(S3SourceTest, AListingAnsweredInternalErrorOnceIsRetriedAndRegistrationSucceeds) {
  Put("listed/a.bin", "bytes of a");
  StartServer(endpoint());
  front_->FailNext(SigV4FrontEnd::Requests::kListings, 1, 500, "InternalError");
  v1::DatasetInfo info;
  grpc::Status added =
      AddDataset(stub_.get(), "listed", SourceOf(endpoint(), "listed"), kChunkSize, &info);
  ASSERT_TRUE(added.ok()) << added.error_message();
  EXPECT_EQ(info.file_count(), 1);
  EXPECT_EQ(front_->failed_gets(), 1);
  EXPECT_THAT(server_->log(), HasSubstr("answered HTTP 500 (InternalError: "));
  ReadResult read = ReadChunk(stub_.get(), info.version(), FileId("listed", "a.bin", &info), 0);
  ASSERT_TRUE(read.status.ok()) << read.status.error_message();
  EXPECT_EQ(read.data, "bytes of a");
}

TEST_F(S3SourceTest, WrongCredentialsFailNamingTheEndpointAndTheStatus) {
  StartServer(endpoint(), {absl::StrCat("AWS_ACCESS_KEY_ID=", kS3rverKey),
                           "AWS_SECRET_ACCESS_KEY=not-the-secret"});
  v1::DatasetInfo info;
  grpc::Status added =
      AddDataset(stub_.get(), "wrong", SourceOf(endpoint(), ""), kChunkSize, &info);
  EXPECT_EQ(added.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(added.error_message(), HasSubstr(endpoint()));
  EXPECT_THAT(added.error_message(), HasSubstr("HTTP 403 (SignatureDoesNotMatch"));
  EXPECT_THAT(added.error_message(), ::testing::Not(HasSubstr("not-the-secret")));
  EXPECT_THAT(server_->log(), ::testing::Not(HasSubstr("not-the-secret")));
}

TEST_F(S3SourceTest, AnEndpointNotConfiguredIsRefused) {
  StartServer("http://127.0.0.1:1");
  v1::DatasetInfo info;
  grpc::Status added =
      AddDataset(stub_.get(), "other", SourceOf(endpoint(), ""), kChunkSize, &info);
  EXPECT_EQ(added.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(added.error_message(), HasSubstr(endpoint()));
  EXPECT_THAT(added.error_message(), HasSubstr("s3_endpoints"));
}

TEST_F(S3SourceTest, MissingCredentialsAreNamedWithWhereGranarydLooked) {
  StartServer(endpoint(), {});
  v1::DatasetInfo info;
  grpc::Status added =
      AddDataset(stub_.get(), "nokeys", SourceOf(endpoint(), ""), kChunkSize, &info);
  EXPECT_EQ(added.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(added.error_message(), HasSubstr("no S3 credentials for profile 'default'"));
  EXPECT_THAT(added.error_message(), HasSubstr(home_.path() + "/.aws/credentials"));
}

TEST_F(S3SourceTest, AProfileInTheSharedCredentialsFileSigns) {
  Put("p/file", "via a profile");
  WriteSharedCredentials("[other]\naws_access_key_id = wrong\n\n[ml]\n");
  StartServer(endpoint(), {});
  S3Location location;
  location.bucket = kBucket;
  location.prefix = "p/";
  location.endpoint = endpoint();
  location.profile = "ml";
  v1::DatasetInfo info;
  grpc::Status added =
      AddDataset(stub_.get(), "profiled", FormatS3Source(location), kChunkSize, &info);
  ASSERT_TRUE(added.ok()) << added.error_message();
  EXPECT_THAT(info.source(), HasSubstr("profile=ml"));
  EXPECT_THAT(info.source(), ::testing::Not(HasSubstr(kS3rverSecret)));
}

TEST_F(S3SourceTest, AnEndpointsProfileInGranarydsConfigSignsDatasetsThatNameNone) {
  Put("c/file", "via the endpoint's profile");
  WriteSharedCredentials("[store]\n");
  const std::string config = home_.path() + "/granaryd.yaml";
  std::ofstream(config) << "s3_endpoint_profiles:\n  \"" << endpoint() << "\": store\n";
  extra_server_args_ = {"--config", config};
  // Keys in the environment that would be refused: the endpoint's profile is
  // used in their place.
  StartServer(endpoint(), {absl::StrCat("AWS_ACCESS_KEY_ID=", kS3rverKey),
                           "AWS_SECRET_ACCESS_KEY=not-the-secret"});
  v1::DatasetInfo info;
  grpc::Status added =
      AddDataset(stub_.get(), "configured", SourceOf(endpoint(), "c"), kChunkSize, &info);
  ASSERT_TRUE(added.ok()) << added.error_message();
  EXPECT_THAT(info.source(), ::testing::Not(HasSubstr("profile=")));
  ReadResult read = ReadChunk(stub_.get(), info.version(), FileId("configured", "file", &info), 0);
  ASSERT_TRUE(read.status.ok()) << read.status.error_message();
  EXPECT_EQ(read.data, "via the endpoint's profile");
  EXPECT_THAT(server_->log(), ::testing::Not(HasSubstr(kS3rverSecret)));
  EXPECT_EQ(front_->signature_refusals(), 0);
}

TEST_F(S3SourceTest, AnEndpointProfileForAnEndpointNotAllowedIsRefusedAtStart) {
  GranarydOptions options;
  options.extra_args = {"--s3-endpoint", endpoint(), "--s3-endpoint-profile",
                        "http://127.0.0.1:1=store"};
  auto server = GranarydProcess::Start(options);
  ASSERT_FALSE(server.ok());
  EXPECT_THAT(server.status().message(),
              HasSubstr("s3_endpoint_profiles: endpoint http://127.0.0.1:1 is not one granaryd "
                        "may read"));
  options.extra_args = {"--s3-endpoint", endpoint(), "--s3-endpoint-profile", "store"};
  server = GranarydProcess::Start(options);
  ASSERT_FALSE(server.ok());
  EXPECT_THAT(server.status().message(),
              HasSubstr("--s3-endpoint-profile: 'store' is not ENDPOINT=PROFILE"));
}

TEST_F(S3SourceTest, TheMountServesTheBucketsTree) {
  Put("m/dir/one.txt", "one");
  Put("m/dir/sub/two.txt", PatternBytes(2 * kChunkSize + 5, 3));
  Put("m/empty", "");
  StartServer(endpoint());
  v1::DatasetInfo info;
  ASSERT_TRUE(AddDataset(stub_.get(), "m", SourceOf(endpoint(), "m"), kChunkSize, &info).ok());
  auto mount = FuseMount::Start(server_->socket_address(), {}, "m");
  ASSERT_TRUE(mount.ok()) << mount.status();
  auto read = [&](const std::string& path) {
    std::ifstream in((*mount)->path() + "/m/" + path, std::ios::binary);
    std::stringstream out;
    out << in.rdbuf();
    return out.str();
  };
  EXPECT_EQ(read("dir/one.txt"), "one");
  EXPECT_EQ(read("dir/sub/two.txt"), PatternBytes(2 * kChunkSize + 5, 3));
  EXPECT_EQ(read("empty"), "");
  struct stat st {};
  ASSERT_EQ(stat(((*mount)->path() + "/m/dir/sub").c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0500u);
}

TEST_F(S3SourceTest, AMountWhoseGranarydIsGoneReadsTheBucketItself) {
  const std::string big = PatternBytes(2 * kChunkSize + 77, 5);
  Put("f/big.bin", big);
  Put("f/warm.bin", "read while granaryd ran");
  Put("f/changed.bin", "as registered");
  StartServer(endpoint());
  v1::DatasetInfo info;
  ASSERT_TRUE(AddDataset(stub_.get(), "f", SourceOf(endpoint(), "f"), kChunkSize, &info).ok());
  ScopedEnvironment keys({{"AWS_ACCESS_KEY_ID", kS3rverKey},
                          {"AWS_SECRET_ACCESS_KEY", kS3rverSecret},
                          {"AWS_PROFILE", std::nullopt}});
  auto mount = FuseMount::Start(server_->socket_address(), {}, "f");
  ASSERT_TRUE(mount.ok()) << mount.status();
  ASSERT_TRUE(server_->Kill().ok());

  const int refusals = front_->signature_refusals();
  FileRead read = ReadWhole((*mount)->path() + "/f/big.bin");
  EXPECT_EQ(read.error, 0) << std::strerror(read.error) << "\n" << (*mount)->log();
  EXPECT_TRUE(read.bytes == big) << "wrong bytes from the source";
  EXPECT_EQ(front_->signature_refusals(), refusals);

  Put("f/changed.bin", "overwritten after registration");
  read = ReadWhole((*mount)->path() + "/f/changed.bin");
  EXPECT_EQ(read.error, ESTALE) << std::strerror(read.error);
  EXPECT_THAT((*mount)->log(), HasSubstr("s3://data/f/changed.bin"));
  EXPECT_THAT((*mount)->log(), ::testing::Not(HasSubstr(kS3rverSecret)));
}

TEST_F(S3SourceTest, AMountWithWrongOrNoKeysFailsDirectReadsWithEioAndServesTheRest) {
  Put("k/cold.bin", "never read through granaryd");
  Put("k/warm.bin", "read while granaryd ran");
  StartServer(endpoint());
  v1::DatasetInfo info;
  ASSERT_TRUE(AddDataset(stub_.get(), "k", SourceOf(endpoint(), "k"), kChunkSize, &info).ok());
  TempDir empty_home;
  struct Case {
    std::string what;
    std::map<std::string, std::optional<std::string>> environment;
    std::string logged;
  };
  const std::vector<Case> cases = {
      {"wrong secret",
       {{"AWS_ACCESS_KEY_ID", kS3rverKey},
        {"AWS_SECRET_ACCESS_KEY", "not-the-secret"},
        {"AWS_PROFILE", std::nullopt}},
       "HTTP 403 (SignatureDoesNotMatch"},
      {"no keys",
       {{"AWS_ACCESS_KEY_ID", std::nullopt},
        {"AWS_SECRET_ACCESS_KEY", std::nullopt},
        {"AWS_PROFILE", std::nullopt},
        {"HOME", empty_home.path()}},
       "no S3 credentials for profile 'default'"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    if (&c != &cases.front()) {
      ASSERT_TRUE(server_->Restart().ok());
    }
    ScopedEnvironment environment(c.environment);
    auto mount = FuseMount::Start(server_->socket_address(), {}, "k");
    ASSERT_TRUE(mount.ok()) << mount.status();
    EXPECT_EQ(ReadWhole((*mount)->path() + "/k/warm.bin").bytes, "read while granaryd ran");
    // A first open is answered with an in-memory copy while granaryd stores
    // the file; once it has, an open is handed its data file, which the mount
    // keeps.
    for (int i = 0; i < 100 && server_->Metric("granary_store_whole_files_total").value_or(0) < 1;
         ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      EXPECT_EQ(ReadWhole((*mount)->path() + "/k/warm.bin").bytes, "read while granaryd ran");
    }
    ASSERT_TRUE(server_->Kill().ok());

    FileRead cold = ReadWhole((*mount)->path() + "/k/cold.bin");
    EXPECT_EQ(cold.error, EIO) << std::strerror(cold.error);
    const std::string log = (*mount)->log();
    EXPECT_THAT(log, HasSubstr("s3://data/k/cold.bin"));
    EXPECT_THAT(log, HasSubstr(endpoint()));
    EXPECT_THAT(log, HasSubstr(c.logged));
    EXPECT_THAT(log, ::testing::Not(HasSubstr("not-the-secret")));
    FileRead warm = ReadWhole((*mount)->path() + "/k/warm.bin");
    EXPECT_EQ(warm.error, 0) << std::strerror(warm.error);
    EXPECT_EQ(warm.bytes, "read while granaryd ran");
  }
}

// The granary CLI's standard output and error, and its exit status.
std::string RunCli(const std::string& args) {
  std::string output;
  FILE* pipe = popen((GRANARY_CLI_PATH " " + args + " 2>&1; echo \"exit $?\"").c_str(), "r");
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof(buffer), pipe)) output.append(buffer, n);
  pclose(pipe);
  return output;
}

TEST_F(S3SourceTest, TheCliRegistersABucketFromItsFlags) {
  Put("cli/x/file.txt", "through the CLI");
  StartServer(endpoint());
  const std::string server = "--server " + server_->socket_address();
  std::string added = RunCli(server + " dataset add cli s3://data/cli --endpoint " + endpoint() +
                             " --region us-east-1 --readers-group 0");
  EXPECT_THAT(added, HasSubstr("registered dataset 'cli': 1 files, 2 directories"));
  EXPECT_THAT(added, HasSubstr("exit 0"));
  std::string shown = RunCli(server + " dataset show cli");
  EXPECT_THAT(shown, HasSubstr("s3://data/cli/?endpoint="));
  EXPECT_THAT(shown, HasSubstr("&readers_gid=0"));
  EXPECT_THAT(RunCli(server + " cat cli/x/file.txt"), HasSubstr("through the CLI"));
  std::string refused = RunCli(server + " dataset add posix /tmp --endpoint " + endpoint());
  EXPECT_THAT(refused, HasSubstr("are for s3:// sources, not '/tmp'"));
  EXPECT_THAT(refused, HasSubstr("exit 1"));
}

}  // namespace
}  // namespace granary::testing
