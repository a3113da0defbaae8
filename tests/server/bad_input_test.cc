// Every bad input gets the right gRPC code and a message naming the problem,
// and the server keeps serving afterwards.
#include <gtest/gtest.h>

#include "grpcpp/client_context.h"
#include "tests/server/server_test_util.h"
#include "tests/support/granaryd_process.h"

namespace granary::testing {
namespace {

constexpr uint32_t kChunk = 1 << 20;

class BadInputTest : public GranarydTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(StartServer());
    WriteSourceFile(source_.path(), "dir/file", PatternBytes(kChunk + 10, 1));
    v1::DatasetInfo info;
    ASSERT_TRUE(AddDataset(stub_.get(), "good", source_.path(), kChunk, &info).ok());
    version_ = info.version();
    std::vector<v1::ManifestEntry> entries;
    ASSERT_TRUE(GetManifest(stub_.get(), "good", 0, &entries).ok());
    ASSERT_EQ(entries.size(), 3u);  // "", "dir", "dir/file".
  }

  void TearDown() override {
    // Whatever happened, the server still answers correctly.
    ReadResult read = ReadChunk(stub_.get(), version_, kFileId, 1);
    ASSERT_TRUE(read.status.ok()) << read.status.error_message();
    EXPECT_EQ(read.data.size(), 10u);
  }

  static constexpr uint64_t kDirId = 1;
  static constexpr uint64_t kFileId = 2;
  uint64_t version_ = 0;
};

void ExpectError(const grpc::Status& status, grpc::StatusCode code, const std::string& named) {
  EXPECT_EQ(status.error_code(), code) << status.error_message();
  EXPECT_NE(status.error_message().find(named), std::string::npos)
      << "'" << status.error_message() << "' does not name '" << named << "'";
}

TEST_F(BadInputTest, UnknownDatasetIsNotFoundEverywhere) {
  v1::DatasetInfo info;
  {
    grpc::ClientContext context;
    v1::GetDatasetRequest request;
    request.set_name("nope");
    ExpectError(stub_->GetDataset(&context, request, &info), grpc::StatusCode::NOT_FOUND, "nope");
  }
  {
    grpc::ClientContext context;
    v1::RefreshDatasetRequest request;
    request.set_name("nope");
    ExpectError(stub_->RefreshDataset(&context, request, &info), grpc::StatusCode::NOT_FOUND,
                "nope");
  }
  {
    grpc::ClientContext context;
    v1::RemoveDatasetRequest request;
    request.set_name("nope");
    v1::RemoveDatasetResponse response;
    ExpectError(stub_->RemoveDataset(&context, request, &response), grpc::StatusCode::NOT_FOUND,
                "nope");
  }
  {
    grpc::ClientContext context;
    v1::LocateRequest request;
    request.set_name("nope");
    v1::LocateResponse response;
    ExpectError(stub_->Locate(&context, request, &response), grpc::StatusCode::NOT_FOUND, "nope");
  }
  std::vector<v1::ManifestEntry> entries;
  ExpectError(GetManifest(stub_.get(), "nope", 0, &entries), grpc::StatusCode::NOT_FOUND, "nope");
  ExpectError(GetManifest(stub_.get(), "good", 12345, &entries), grpc::StatusCode::NOT_FOUND,
              "0000000000003039");
  v1::PrewarmRequest prewarm;
  prewarm.set_name("nope");
  std::vector<v1::PrewarmProgress> progress;
  ExpectError(Prewarm(stub_.get(), prewarm, &progress), grpc::StatusCode::NOT_FOUND, "nope");
}

TEST_F(BadInputTest, RegistrationErrorsNameTheProblem) {
  v1::DatasetInfo info;
  ExpectError(AddDataset(stub_.get(), "good", source_.path(), 0, &info),
              grpc::StatusCode::ALREADY_EXISTS, "good");
  ExpectError(AddDataset(stub_.get(), "x", "/does/not/exist", 0, &info),
              grpc::StatusCode::NOT_FOUND, "/does/not/exist");
  ExpectError(AddDataset(stub_.get(), "x", "posix:///does/not/exist", 0, &info),
              grpc::StatusCode::NOT_FOUND, "/does/not/exist");
  ExpectError(AddDataset(stub_.get(), "x", source_.path() + "/dir/file", 0, &info),
              grpc::StatusCode::INVALID_ARGUMENT, "dir/file");
  ExpectError(AddDataset(stub_.get(), "x", "relative/path", 0, &info),
              grpc::StatusCode::INVALID_ARGUMENT, "relative/path");
  ExpectError(AddDataset(stub_.get(), "x", "ftp://host/data", 0, &info),
              grpc::StatusCode::INVALID_ARGUMENT, "ftp://host/data");
  ExpectError(AddDataset(stub_.get(), "x", "", 0, &info), grpc::StatusCode::INVALID_ARGUMENT,
              "source ''");
  for (const char* name : {"", "../up", "a/b", ".hidden", "sp ace"}) {
    ExpectError(AddDataset(stub_.get(), name, source_.path(), 0, &info),
                grpc::StatusCode::INVALID_ARGUMENT, std::string("'") + name + "'");
  }
  ExpectError(AddDataset(stub_.get(), "x", source_.path(), 4096, &info),
              grpc::StatusCode::INVALID_ARGUMENT, "chunk size 4096");
  ExpectError(AddDataset(stub_.get(), "x", source_.path(), 65u << 20, &info),
              grpc::StatusCode::INVALID_ARGUMENT, "chunk size 68157440");
  ExpectError(AddDataset(stub_.get(), "x", source_.path(), 0, &info, 9),
              grpc::StatusCode::INVALID_ARGUMENT, "9 replicas");
}

TEST_F(BadInputTest, ReadErrorsNameTheProblem) {
  {
    grpc::ClientContext context;
    auto reader = stub_->ReadChunk(&context, v1::ReadChunkRequest());
    v1::ReadChunkResponse response;
    while (reader->Read(&response)) {
    }
    ExpectError(reader->Finish(), grpc::StatusCode::INVALID_ARGUMENT, "chunk key");
  }
  ExpectError(ReadChunk(stub_.get(), 12345, kFileId, 0).status, grpc::StatusCode::NOT_FOUND,
              "0000000000003039");
  ExpectError(ReadChunk(stub_.get(), version_, 99, 0).status, grpc::StatusCode::OUT_OF_RANGE,
              "file id 99");
  ExpectError(ReadChunk(stub_.get(), version_, kFileId, 2).status, grpc::StatusCode::OUT_OF_RANGE,
              "dir/file");
  ExpectError(ReadChunk(stub_.get(), version_, kDirId, 0).status,
              grpc::StatusCode::INVALID_ARGUMENT, "'dir'");
  ExpectError(ReadChunk(stub_.get(), version_, kFileId, 1, 11).status,
              grpc::StatusCode::OUT_OF_RANGE, "offset 11");
  // A negative offset sent as the unsigned field wraps to a huge one.
  ExpectError(ReadChunk(stub_.get(), version_, kFileId, 0, static_cast<uint32_t>(-1)).status,
              grpc::StatusCode::OUT_OF_RANGE, "offset 4294967295");
  // Offset at the very end reads nothing, successfully.
  ReadResult empty = ReadChunk(stub_.get(), version_, kFileId, 1, 10);
  EXPECT_TRUE(empty.status.ok());
  EXPECT_TRUE(empty.data.empty());
  EXPECT_EQ(*server_->Metric("granary_read_errors_total"), 7);
}

TEST_F(BadInputTest, PrewarmPathErrorsNameThePath) {
  std::vector<v1::PrewarmProgress> progress;
  for (const char* path : {"../etc", "/etc/passwd", "dir/../../x"}) {
    v1::PrewarmRequest request;
    request.set_name("good");
    request.add_paths(path);
    ExpectError(Prewarm(stub_.get(), request, &progress), grpc::StatusCode::INVALID_ARGUMENT, path);
  }
  v1::PrewarmRequest request;
  request.set_name("good");
  request.add_paths("dir/missing");
  ExpectError(Prewarm(stub_.get(), request, &progress), grpc::StatusCode::NOT_FOUND, "dir/missing");
  request.clear_paths();
  request.set_parallelism(100000);
  ExpectError(Prewarm(stub_.get(), request, &progress), grpc::StatusCode::INVALID_ARGUMENT,
              "parallelism 100000");
  EXPECT_TRUE(progress.empty());
}

}  // namespace
}  // namespace granary::testing
