// Registering, reading back, refreshing and removing datasets on a real
// granaryd, over its Unix socket and over TCP.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <map>

#include "absl/strings/str_format.h"
#include "grpcpp/client_context.h"
#include "tests/server/server_test_util.h"
#include "tests/support/granaryd_process.h"

namespace granary::testing {
namespace {

constexpr uint32_t kChunk = 1 << 20;

class DatasetTest : public GranarydTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(StartServer());
    root_ = source_.path() + "/data";
    files_["a.bin"] = PatternBytes(2 * kChunk + 12345, 1);  // Three chunks.
    files_["dir/b.txt"] = "hello granary\n";
    files_["dir/sub/c.bin"] = PatternBytes(kChunk, 2);  // Exactly one chunk.
    files_["empty"] = "";
    for (const auto& [path, content] : files_) WriteSourceFile(root_, path, content);
    std::filesystem::create_directories(root_ + "/empty_dir");
    std::filesystem::create_symlink("dir/b.txt", root_ + "/inside_link");
    std::filesystem::create_symlink("../../etc/passwd", root_ + "/outside_link");
  }

  // Every entry of the current manifest, by path.
  std::map<std::string, std::pair<uint64_t, v1::ManifestEntry>> Entries(const std::string& name,
                                                                        uint64_t version = 0) {
    std::vector<v1::ManifestEntry> entries;
    grpc::Status status = GetManifest(stub_.get(), name, version, &entries);
    EXPECT_TRUE(status.ok()) << status.error_message();
    std::map<std::string, std::pair<uint64_t, v1::ManifestEntry>> by_path;
    for (uint64_t id = 0; id < entries.size(); ++id)
      by_path[entries[id].path()] = {id, entries[id]};
    return by_path;
  }

  std::string root_;
  std::map<std::string, std::string> files_;
};

TEST_F(DatasetTest, RegisterRecordsFilesDirectoriesEmptyFilesAndInTreeSymlinks) {
  v1::DatasetInfo info;
  ASSERT_TRUE(AddDataset(stub_.get(), "train", "posix://" + root_, kChunk, &info).ok());
  EXPECT_EQ(info.name(), "train");
  EXPECT_EQ(info.source(), "posix://" + root_);
  EXPECT_EQ(info.chunk_size(), kChunk);
  EXPECT_EQ(info.file_count(), files_.size());
  EXPECT_EQ(info.directory_count(), 4u);  // Root, dir, dir/sub, empty_dir.
  EXPECT_EQ(info.total_bytes(), 2 * kChunk + 12345 + 14 + kChunk);
  EXPECT_EQ(info.chunk_count(), 3u + 1 + 1);
  EXPECT_NE(info.version(), 0u);

  auto entries = Entries("train");
  ASSERT_TRUE(entries.contains(""));
  EXPECT_EQ(entries[""].second.type(), v1::ENTRY_TYPE_DIRECTORY);
  EXPECT_EQ(entries["empty"].second.type(), v1::ENTRY_TYPE_FILE);
  EXPECT_EQ(entries["empty"].second.size(), 0u);
  EXPECT_EQ(entries["empty_dir"].second.type(), v1::ENTRY_TYPE_DIRECTORY);
  EXPECT_EQ(entries["inside_link"].second.type(), v1::ENTRY_TYPE_SYMLINK);
  EXPECT_EQ(entries["inside_link"].second.symlink_target(), "dir/b.txt");
  EXPECT_FALSE(entries.contains("outside_link"));
  struct stat st;
  ASSERT_EQ(::stat((root_ + "/a.bin").c_str(), &st), 0);
  EXPECT_EQ(entries["a.bin"].second.mode(), st.st_mode);
  EXPECT_EQ(entries["a.bin"].second.mtime_ns(),
            st.st_mtim.tv_sec * 1'000'000'000 + st.st_mtim.tv_nsec);

  // A bare path is a posix source too; listing shows both.
  ASSERT_TRUE(AddDataset(stub_.get(), "bare", root_, 0, &info).ok());
  EXPECT_EQ(info.chunk_size(), 4u << 20);
  grpc::ClientContext context;
  v1::ListDatasetsResponse list;
  ASSERT_TRUE(stub_->ListDatasets(&context, v1::ListDatasetsRequest(), &list).ok());
  ASSERT_EQ(list.datasets_size(), 2);
  EXPECT_EQ(list.datasets(0).name(), "bare");
  EXPECT_EQ(list.datasets(1).name(), "train");
}

TEST_F(DatasetTest, EveryFileReadsBackByteForByteOverSocketAndTcp) {
  v1::DatasetInfo info;
  ASSERT_TRUE(AddDataset(stub_.get(), "train", root_, kChunk, &info).ok());
  auto entries = Entries("train");
  std::unique_ptr<v1::Granary::Stub> tcp = server_->TcpStub();
  for (v1::Granary::Stub* stub : {stub_.get(), tcp.get()}) {
    for (const auto& [path, content] : files_) {
      const auto& [id, entry] = entries[path];
      ReadResult read = ReadWholeFile(stub, info.version(), id, entry.size(), kChunk);
      ASSERT_TRUE(read.status.ok()) << path << ": " << read.status.error_message();
      EXPECT_TRUE(read.data == content) << path;
    }
  }
  // The first pass fetched each chunk once; the second was all hits.
  EXPECT_EQ(*server_->Metric("granary_source_reads_total"), 5);
  EXPECT_EQ(*server_->Metric("granary_cache_hits_total"), 5);
  EXPECT_EQ(*server_->Metric("granary_bytes_from_source_total"), info.total_bytes());
  EXPECT_EQ(*server_->Metric("granary_read_latency_seconds_count"), 10);

  // Sub-range reads; a 1 MiB chunk read whole arrives in 1 MiB messages.
  uint64_t a = entries["a.bin"].first;
  ReadResult part = ReadChunk(stub_.get(), info.version(), a, 1, 1000, 5000);
  ASSERT_TRUE(part.status.ok());
  EXPECT_TRUE(part.from_cache);
  EXPECT_TRUE(part.data == files_["a.bin"].substr(kChunk + 1000, 5000));
  ReadResult tail = ReadChunk(stub_.get(), info.version(), a, 2, 12000, 0);
  EXPECT_TRUE(tail.data == files_["a.bin"].substr(2 * kChunk + 12000));
  ReadResult clipped = ReadChunk(stub_.get(), info.version(), a, 2, 12000, 1 << 20);
  EXPECT_EQ(clipped.data.size(), 345u);
  ReadResult whole = ReadChunk(stub_.get(), info.version(), a, 0);
  EXPECT_EQ(whole.messages, 1);
  EXPECT_EQ(whole.data.size(), kChunk);

  v1::LocateRequest locate_request;
  locate_request.set_name("train");
  v1::LocateResponse locate;
  grpc::ClientContext context;
  ASSERT_TRUE(stub_->Locate(&context, locate_request, &locate).ok());
  ASSERT_EQ(locate.nodes_size(), 1);
  EXPECT_EQ(locate.nodes(0).cached_bytes(), info.total_bytes());
  EXPECT_DOUBLE_EQ(locate.nodes(0).node_fraction(), 1.0);
  ASSERT_EQ(locate.groups_size(), 1);
  EXPECT_DOUBLE_EQ(locate.groups(0).fraction(), 1.0);
}

TEST_F(DatasetTest, LargeChunksStreamInMessagesOfAtMostOneMiB) {
  WriteSourceFile(root_, "big.bin", PatternBytes(5 * kChunk / 2, 9));
  v1::DatasetInfo info;
  ASSERT_TRUE(AddDataset(stub_.get(), "big", root_, 4 * kChunk, &info).ok());
  auto entries = Entries("big");
  ReadResult read = ReadChunk(stub_.get(), info.version(), entries["big.bin"].first, 0);
  ASSERT_TRUE(read.status.ok()) << read.status.error_message();
  EXPECT_EQ(read.messages, 3);
  EXPECT_TRUE(read.data == PatternBytes(5 * kChunk / 2, 9));
}

TEST_F(DatasetTest, RefreshMakesANewVersionAndKeepsTheOldReadable) {
  v1::DatasetInfo first;
  ASSERT_TRUE(AddDataset(stub_.get(), "train", root_, kChunk, &first).ok());
  auto old_entries = Entries("train");

  v1::RefreshDatasetRequest refresh;
  refresh.set_name("train");
  v1::DatasetInfo same;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(stub_->RefreshDataset(&context, refresh, &same).ok());
  }
  EXPECT_EQ(same.version(), first.version()) << "nothing changed, so no new version";

  WriteSourceFile(root_, "dir/b.txt", "changed content, longer than before\n");
  WriteSourceFile(root_, "new.txt", "new file\n");
  v1::DatasetInfo second;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(stub_->RefreshDataset(&context, refresh, &second).ok());
  }
  EXPECT_NE(second.version(), first.version());
  ASSERT_EQ(second.older_versions_size(), 1);
  EXPECT_EQ(second.older_versions(0), first.version());
  EXPECT_EQ(second.file_count(), files_.size() + 1);

  auto entries = Entries("train");
  ReadResult changed = ReadWholeFile(stub_.get(), second.version(), entries["dir/b.txt"].first,
                                     entries["dir/b.txt"].second.size(), kChunk);
  ASSERT_TRUE(changed.status.ok());
  EXPECT_EQ(changed.data, "changed content, longer than before\n");
  // The old version still lists and reads its unchanged files...
  auto listed_old = Entries("train", first.version());
  EXPECT_EQ(listed_old.size(), old_entries.size());
  ReadResult old_a = ReadWholeFile(stub_.get(), first.version(), old_entries["a.bin"].first,
                                   old_entries["a.bin"].second.size(), kChunk);
  ASSERT_TRUE(old_a.status.ok());
  EXPECT_TRUE(old_a.data == files_["a.bin"]);
  // ...but never serves new bytes under the old version.
  ReadResult old_b = ReadChunk(stub_.get(), first.version(), old_entries["dir/b.txt"].first, 0);
  EXPECT_EQ(old_b.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);

  v1::RemoveDatasetRequest remove;
  remove.set_name("train");
  v1::RemoveDatasetResponse removed;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(stub_->RemoveDataset(&context, remove, &removed).ok());
  }
  EXPECT_GT(removed.freed_bytes(), 0u);
  v1::GetDatasetRequest get;
  get.set_name("train");
  v1::DatasetInfo gone;
  grpc::ClientContext context;
  grpc::Status status = stub_->GetDataset(&context, get, &gone);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(status.error_message().find("train"), std::string::npos);
  ReadResult after = ReadChunk(stub_.get(), first.version(), old_entries["a.bin"].first, 0);
  EXPECT_EQ(after.status.error_code(), grpc::StatusCode::NOT_FOUND);
  // The name is free again.
  v1::DatasetInfo again;
  EXPECT_TRUE(AddDataset(stub_.get(), "train", root_, kChunk, &again).ok());
}

TEST_F(DatasetTest, CatalogSurvivesARestart) {
  v1::DatasetInfo info;
  ASSERT_TRUE(AddDataset(stub_.get(), "train", root_, kChunk, &info).ok());
  auto entries = Entries("train");
  ReadResult first = ReadWholeFile(stub_.get(), info.version(), entries["a.bin"].first,
                                   files_["a.bin"].size(), kChunk);
  ASSERT_TRUE(first.status.ok());
  auto exit_status = server_->Terminate();
  ASSERT_TRUE(exit_status.ok()) << exit_status.status();
  {
    absl::Status restarted = server_->Restart();
    ASSERT_TRUE(restarted.ok()) << restarted;
  }
  stub_ = server_->SocketStub();
  EXPECT_EQ(Entries("train").size(), entries.size());
  ReadResult again = ReadWholeFile(stub_.get(), info.version(), entries["a.bin"].first,
                                   files_["a.bin"].size(), kChunk);
  ASSERT_TRUE(again.status.ok());
  EXPECT_TRUE(again.data == files_["a.bin"]);
  EXPECT_EQ(*server_->Metric("granary_source_reads_total"), 0) << "chunks survived the restart";
}

TEST_F(DatasetTest, ChangedSourceFileFailsWithFailedPreconditionNamingIt) {
  v1::DatasetInfo info;
  ASSERT_TRUE(AddDataset(stub_.get(), "train", root_, kChunk, &info).ok());
  auto entries = Entries("train");

  // Same size, new content and mtime.
  std::string replaced = files_["dir/sub/c.bin"];
  replaced[0] ^= 1;
  WriteSourceFile(root_, "dir/sub/c.bin", replaced);
  ReadResult stale = ReadChunk(stub_.get(), info.version(), entries["dir/sub/c.bin"].first, 0);
  EXPECT_EQ(stale.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(stale.status.error_message().find("dir/sub/c.bin"), std::string::npos)
      << stale.status.error_message();

  // A file removed after registration (tests run as root, so permission bits
  // cannot make a file unreadable here; removal and truncation can).
  std::filesystem::remove(root_ + "/dir/b.txt");
  ReadResult removed = ReadChunk(stub_.get(), info.version(), entries["dir/b.txt"].first, 0);
  EXPECT_EQ(removed.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(removed.status.error_message().find("dir/b.txt"), std::string::npos);

  // A file truncated between its first and last chunk: the bytes already
  // cached stay, the rest fails; no mixed bytes.
  ASSERT_TRUE(ReadChunk(stub_.get(), info.version(), entries["a.bin"].first, 0).status.ok());
  ASSERT_EQ(::truncate((root_ + "/a.bin").c_str(), kChunk), 0);
  ReadResult truncated = ReadChunk(stub_.get(), info.version(), entries["a.bin"].first, 1);
  EXPECT_EQ(truncated.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(truncated.status.error_message().find("a.bin"), std::string::npos);

  // The server goes on serving.
  ReadResult good = ReadChunk(stub_.get(), info.version(), entries["a.bin"].first, 0);
  ASSERT_TRUE(good.status.ok());
  EXPECT_TRUE(good.data == files_["a.bin"].substr(0, kChunk));
  EXPECT_EQ(*server_->Metric("granary_source_errors_total"), 3);
}

// With a budget of 1 MiB, under two manifests of 3,500 files: every
// dataset's files still read back, each manifest loaded again from the
// catalog when asked for after others pushed it out, and what is in memory
// once the reads are done stays within the budget.
TEST(ManifestMemoryTest, EveryDatasetReadsBackWithinASmallManifestBudget) {
  constexpr int kDatasets = 4;
  constexpr int kFiles = 3500;
  TempDir source;
  for (int d = 0; d < kDatasets; ++d) {
    for (int i = 0; i < kFiles; ++i) {
      const std::string name = absl::StrFormat("ds%d", d);
      const std::string path = absl::StrFormat("f-%05d", i);
      WriteSourceFile(source.path() + "/" + name, path, name + "/" + path);
    }
  }
  GranarydOptions options;
  options.extra_args = {"--manifest-memory-mib", "1"};
  auto server = GranarydProcess::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  std::unique_ptr<v1::Granary::Stub> stub = (*server)->SocketStub();
  std::vector<uint64_t> versions;
  for (int d = 0; d < kDatasets; ++d) {
    const std::string name = absl::StrFormat("ds%d", d);
    v1::DatasetInfo info;
    grpc::Status added = AddDataset(stub.get(), name, source.path() + "/" + name, 0, &info);
    ASSERT_TRUE(added.ok()) << added.error_message();
    versions.push_back(info.version());
  }
  // Twice round the datasets, each time pushing the others' manifests out.
  for (int round = 0; round < 2; ++round) {
    for (int d = 0; d < kDatasets; ++d) {
      const std::string name = absl::StrFormat("ds%d", d);
      std::vector<v1::ManifestEntry> entries;
      grpc::Status listed = GetManifest(stub.get(), name, versions[d], &entries);
      ASSERT_TRUE(listed.ok()) << listed.error_message();
      ASSERT_EQ(entries.size(), kFiles + 1u);  // And the root.
      for (uint64_t id : {uint64_t{1}, uint64_t{kFiles / 2}, uint64_t{kFiles}}) {
        ReadResult read = ReadWholeFile(stub.get(), versions[d], id, entries[id].size(), 4 << 20);
        ASSERT_TRUE(read.status.ok()) << read.status.error_message();
        EXPECT_EQ(read.data, name + "/" + entries[id].path());
      }
    }
  }
  // Nothing reads now, so nothing is held past the budget.
  EXPECT_LE(*(*server)->Metric("granary_manifest_memory_bytes"), 1 << 20);
  EXPECT_GE(*(*server)->Metric("granary_manifests_in_memory"), 1);
  EXPECT_LT(*(*server)->Metric("granary_manifests_in_memory"), kDatasets);
  EXPECT_GE(*(*server)->Metric("granary_manifest_loads_total"), 2 * kDatasets);
}

}  // namespace
}  // namespace granary::testing
