#include "tests/faults/fault_fixture.h"

#include "common/dataset/chunk_math.h"
#include "tests/server/server_test_util.h"

namespace granary::testing {

void FaultTest::StartServerAndRegister(GranarydOptions options) {
  auto server = GranarydProcess::Start(std::move(options));
  ASSERT_TRUE(server.ok()) << server.status();
  server_ = *std::move(server);
  stub_ = server_->SocketStub();
  grpc::Status added = AddDataset(stub_.get(), "ds", source_, kChunk, &info_);
  ASSERT_TRUE(added.ok()) << added.error_message();
  entries_.clear();
  ASSERT_TRUE(GetManifest(stub_.get(), "ds", 0, &entries_).ok());
}

void FaultTest::Mount(std::vector<std::string> extra_args) {
  auto mount = FuseMount::Start(server_->socket_address(), extra_args, "ds");
  ASSERT_TRUE(mount.ok()) << mount.status();
  mount_ = *std::move(mount);
  mounted_ = mount_->path() + "/ds";
}

double FaultTest::Metric(const std::string& name) {
  absl::StatusOr<double> value = server_->Metric(name);
  EXPECT_TRUE(value.ok()) << value.status();
  return value.value_or(-1);
}

uint64_t FaultTest::FileId(const std::string& path) const {
  for (uint64_t id = 0; id < entries_.size(); ++id) {
    if (entries_[id].path() == path) return id;
  }
  ADD_FAILURE() << "no manifest entry " << path;
  return 0;
}

uint64_t FaultTest::VerifyCachedChunks(const std::vector<SourceFile>& files, ReadTally* tally) {
  uint64_t cached = 0;
  for (const SourceFile& file : files) {
    const uint64_t id = FileId(file.path);
    for (uint64_t index = 0; index < ChunkCount(file.size, kChunk); ++index) {
      v1::ReadChunkRequest request;
      request.mutable_key()->set_dataset_version(info_.version());
      request.mutable_key()->set_file_id(id);
      request.mutable_key()->set_chunk_index(static_cast<uint32_t>(index));
      request.set_cache_only(true);
      ReadResult read = ReadChunk(stub_.get(), request);
      if (read.status.error_code() == grpc::StatusCode::NOT_FOUND) continue;
      if (!read.status.ok()) {
        tally->errors++;
        ADD_FAILURE() << file.path << " chunk " << index << ": " << read.status.error_message();
        continue;
      }
      ++cached;
      TallyRead(read.data,
                ExpectedBytes(file.seed, index * kChunk, ChunkLength(file.size, kChunk, index)),
                tally);
    }
  }
  return cached;
}

v1::PrewarmProgress FaultTest::PrewarmAll() {
  v1::PrewarmRequest request;
  request.set_name("ds");
  std::vector<v1::PrewarmProgress> progress;
  grpc::Status status = Prewarm(stub_.get(), request, &progress);
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_FALSE(progress.empty());
  return progress.empty() ? v1::PrewarmProgress() : progress.back();
}

}  // namespace granary::testing
