// Fills over a real granaryd: a cold read of a dataset starts filling the rest
// of it in the background, each chunk read from the source once, visible in
// Status and Locate; it waits while its version is read from the cache;
// datasets whose policy (their own, or the node's default)
// is "none" cache only what is read; a fill ends when its version is
// refreshed away or its dataset removed.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpcpp/client_context.h"
#include "tests/server/server_test_util.h"
#include "tests/support/granaryd_process.h"

namespace granary::testing {
namespace {

constexpr uint32_t kChunk = 1 << 20;

class FillTest : public ::testing::Test {
 protected:
  // A granaryd whose default fill policy is `fill`, with `workers` fill (and
  // prewarm) workers and the config keys in `more_config`.
  std::unique_ptr<GranarydProcess> StartServer(const std::string& fill, int workers,
                                               const std::string& more_config = "") {
    const std::string config = config_dir_.path() + "/granaryd-" + fill + ".yaml";
    std::ofstream(config) << "prewarm_parallelism: " << workers << "\nfill_parallelism: " << workers
                          << "\n"
                          << more_config;
    GranarydOptions options;
    options.fill = fill;
    options.extra_args = {"--config", config};
    auto server = GranarydProcess::Start(options);
    EXPECT_TRUE(server.ok()) << server.status();
    return server.ok() ? *std::move(server) : nullptr;
  }

  // Registers `source` as `name` with chunks of `chunk_size` and fill policy `fill`.
  static v1::DatasetInfo Register(GranarydProcess& server, const std::string& name,
                                  const std::string& source, uint32_t chunk_size,
                                  v1::FillPolicy fill) {
    grpc::ClientContext context;
    v1::AddDatasetRequest request;
    request.set_name(name);
    request.set_source(source);
    request.set_chunk_size(chunk_size);
    request.set_fill(fill);
    v1::DatasetInfo info;
    grpc::Status added = server.SocketStub()->AddDataset(&context, request, &info);
    EXPECT_TRUE(added.ok()) << added.error_message();
    return info;
  }

  static v1::DatasetInfo Describe(GranarydProcess& server, const std::string& name) {
    grpc::ClientContext context;
    v1::GetDatasetRequest request;
    request.set_name(name);
    v1::DatasetInfo info;
    EXPECT_TRUE(server.SocketStub()->GetDataset(&context, request, &info).ok());
    return info;
  }

  // The file id of `path` in the current version of `name`.
  static uint64_t FileId(GranarydProcess& server, const std::string& name,
                         const std::string& path) {
    std::vector<v1::ManifestEntry> entries;
    EXPECT_TRUE(GetManifest(server.SocketStub().get(), name, 0, &entries).ok());
    for (uint64_t id = 0; id < entries.size(); ++id) {
      if (entries[id].path() == path) return id;
    }
    ADD_FAILURE() << "no entry " << path;
    return 0;
  }

  static double Metric(GranarydProcess& server, const std::string& name) {
    absl::StatusOr<double> value = server.Metric(name);
    EXPECT_TRUE(value.ok()) << name << ": " << value.status();
    return value.ok() ? *value : -1;
  }

  // Waits up to `seconds` for `done`.
  template <typename Done>
  static bool Await(Done done, int seconds) {
    for (int i = 0; i < seconds * 20; ++i) {
      if (done()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return done();
  }

  TempDir config_dir_;
  TempDir source_;
};

TEST_F(FillTest, AColdReadFillsTheRestOfTheDatasetReadingEachChunkOnce) {
  for (int i = 0; i < 40; ++i) {
    WriteSourceFile(source_.path(), "d/f" + std::to_string(100 + i), PatternBytes(kChunk + 100, i));
  }
  auto server = StartServer("on-read", 4);
  ASSERT_NE(server, nullptr);
  const v1::DatasetInfo info = Register(*server, "ds", source_.path(), kChunk, v1::FILL_DEFAULT);
  ASSERT_EQ(info.chunk_count(), 80u);

  ReadResult read =
      ReadChunk(server->SocketStub().get(), info.version(), FileId(*server, "ds", "d/f100"), 0);
  ASSERT_TRUE(read.status.ok()) << read.status.error_message();
  EXPECT_TRUE(read.data == PatternBytes(kChunk + 100, 0).substr(0, kChunk));
  EXPECT_TRUE(
      Await([&] { return Describe(*server, "ds").cached_bytes() == info.total_bytes(); }, 30))
      << Describe(*server, "ds").cached_bytes() << " of " << info.total_bytes() << " cached";
  EXPECT_EQ(Metric(*server, "granary_source_reads_total"), 80) << "each chunk read once";

  // The fill counts itself finished a moment after it stored its last chunk.
  v1::StatusResponse status;
  auto local_status = [&] {
    grpc::ClientContext context;
    v1::StatusRequest request;
    request.set_local_only(true);
    status.Clear();
    return server->SocketStub()->Status(&context, request, &status).ok() &&
           status.nodes_size() == 1 && status.nodes(0).fills_size() == 1;
  };
  EXPECT_TRUE(
      Await([&] { return local_status() && status.nodes(0).fills(0).progress().finished(); }, 10));
  ASSERT_TRUE(local_status());
  const v1::FillProgress& fill = status.nodes(0).fills(0);
  EXPECT_EQ(fill.name(), "ds");
  EXPECT_EQ(fill.version(), info.version());
  EXPECT_TRUE(fill.progress().finished());
  EXPECT_EQ(fill.progress().bytes_done(), info.total_bytes());

  grpc::ClientContext locate_context;
  v1::LocateRequest locate_request;
  locate_request.set_name("ds");
  locate_request.set_local_only(true);
  v1::LocateResponse locate;
  ASSERT_TRUE(server->SocketStub()->Locate(&locate_context, locate_request, &locate).ok());
  ASSERT_EQ(locate.nodes_size(), 1);
  EXPECT_TRUE(locate.nodes(0).has_fill());
  EXPECT_TRUE(locate.nodes(0).fill().progress().finished());
}

TEST_F(FillTest, AFillWaitsWhileItsVersionIsReadFromTheCacheAndGoesOnWhenTheReadsStop) {
  // A job reads "a/" only; "b/" is the rest of the dataset.
  for (int i = 0; i < 8; ++i) {
    WriteSourceFile(source_.path(), "a/f" + std::to_string(i), PatternBytes(kChunk, i));
  }
  for (int i = 0; i < 40; ++i) {
    WriteSourceFile(source_.path(), "b/f" + std::to_string(i), PatternBytes(kChunk, 100 + i));
  }
  auto server = StartServer("on-read", 4);
  ASSERT_NE(server, nullptr);
  const v1::DatasetInfo info = Register(*server, "ds", source_.path(), kChunk, v1::FILL_DEFAULT);
  std::vector<uint64_t> job_files;
  for (int i = 0; i < 8; ++i) job_files.push_back(FileId(*server, "ds", "a/f" + std::to_string(i)));
  auto read_job_files = [&] {
    for (uint64_t id : job_files) {
      ReadResult read = ReadChunk(server->SocketStub().get(), info.version(), id, 0);
      ASSERT_TRUE(read.status.ok()) << read.status.error_message();
    }
  };
  read_job_files();  // Cold: the fill starts, with the rest of "a/" first.
  read_job_files();  // Now from the cache.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const double source_reads = Metric(*server, "granary_source_reads_total");
  EXPECT_LT(source_reads, 48) << "the fill went on beside the job's first epoch";
  // Further epochs from the cache, for longer than the reading period: the
  // fill reads nothing meanwhile.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(4);
  while (std::chrono::steady_clock::now() < until) {
    read_job_files();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(Metric(*server, "granary_source_reads_total"), source_reads)
      << "the fill read the source while the version was being read from the cache";
  // The job stops: the fill goes on with "b/" and ends.
  EXPECT_TRUE(
      Await([&] { return Describe(*server, "ds").cached_bytes() == info.total_bytes(); }, 30))
      << Describe(*server, "ds").cached_bytes() << " of " << info.total_bytes() << " cached";
  EXPECT_EQ(Metric(*server, "granary_source_reads_total"), 48) << "each chunk read once";
}

TEST_F(FillTest, DatasetsWhosePolicyIsNoneCacheOnlyWhatIsRead) {
  for (int i = 0; i < 10; ++i) {
    // A char, not "f": GCC 12 at -O3 warns falsely (-Wrestrict) on a string
    // literal + std::string.
    WriteSourceFile(source_.path(), 'f' + std::to_string(i), PatternBytes(kChunk, i));
  }
  // Its own policy says none, on a node whose default is on-read; the
  // default applies to the other, on a node whose default is none.
  auto filling_node = StartServer("on-read", 4);
  auto quiet_node = StartServer("none", 4);
  ASSERT_NE(filling_node, nullptr);
  ASSERT_NE(quiet_node, nullptr);
  const v1::DatasetInfo own = Register(*filling_node, "own", source_.path(), kChunk, v1::FILL_NONE);
  const v1::DatasetInfo by_default =
      Register(*quiet_node, "by_default", source_.path(), kChunk, v1::FILL_DEFAULT);
  EXPECT_EQ(own.fill(), v1::FILL_NONE);
  EXPECT_EQ(by_default.fill(), v1::FILL_DEFAULT);
  ASSERT_TRUE(ReadChunk(filling_node->SocketStub().get(), own.version(),
                        FileId(*filling_node, "own", "f3"), 0)
                  .status.ok());
  ASSERT_TRUE(ReadChunk(quiet_node->SocketStub().get(), by_default.version(),
                        FileId(*quiet_node, "by_default", "f3"), 0)
                  .status.ok());
  std::this_thread::sleep_for(std::chrono::seconds(1));
  for (GranarydProcess* node : {filling_node.get(), quiet_node.get()}) {
    EXPECT_EQ(Metric(*node, "granary_source_reads_total"), 1);
    EXPECT_EQ(Metric(*node, "granary_fill_running"), 0);
    EXPECT_EQ(Metric(*node, "granary_fill_chunks_fetched_total"), 0);
  }
}

TEST_F(FillTest, AFillEndsWhenItsVersionIsRefreshedAwayAndWhenItsDatasetIsRemoved) {
  // Thousands of small chunks and one worker: far longer to fill than the
  // test takes to end it.
  for (int i = 0; i < 3000; ++i) {
    WriteSourceFile(source_.path(), "s/" + std::to_string(i), PatternBytes(64 << 10, i));
  }
  auto server = StartServer("on-read", 1);
  ASSERT_NE(server, nullptr);
  const v1::DatasetInfo first = Register(*server, "ds", source_.path(), kChunk, v1::FILL_ON_READ);
  auto source_reads_settle = [&] {
    const double before = Metric(*server, "granary_source_reads_total");
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    return Metric(*server, "granary_source_reads_total") == before;
  };

  ASSERT_TRUE(
      ReadChunk(server->SocketStub().get(), first.version(), FileId(*server, "ds", "s/0"), 0)
          .status.ok());
  ASSERT_TRUE(Await([&] { return Metric(*server, "granary_fill_chunks_fetched_total") > 0; }, 10));
  WriteSourceFile(source_.path(), "s/new", "a file the first version does not have");
  grpc::ClientContext refresh_context;
  v1::RefreshDatasetRequest refresh;
  refresh.set_name("ds");
  v1::DatasetInfo second;
  ASSERT_TRUE(server->SocketStub()->RefreshDataset(&refresh_context, refresh, &second).ok());
  ASSERT_NE(second.version(), first.version());
  EXPECT_TRUE(Await([&] { return Metric(*server, "granary_fill_running") == 0; }, 5));
  EXPECT_TRUE(source_reads_settle()) << "the old version's fill still reads the source";
  EXPECT_LT(Metric(*server, "granary_source_reads_total"), 3000);

  ASSERT_TRUE(
      ReadChunk(server->SocketStub().get(), second.version(), FileId(*server, "ds", "s/0"), 0)
          .status.ok());
  ASSERT_TRUE(Await([&] { return Metric(*server, "granary_fill_running") == 1; }, 5));
  grpc::ClientContext remove_context;
  v1::RemoveDatasetRequest remove;
  remove.set_name("ds");
  v1::RemoveDatasetResponse removed;
  ASSERT_TRUE(server->SocketStub()->RemoveDataset(&remove_context, remove, &removed).ok());
  EXPECT_TRUE(Await([&] { return Metric(*server, "granary_fill_running") == 0; }, 5));
  EXPECT_TRUE(source_reads_settle()) << "the removed dataset's fill still reads the source";
}

// A finished fill is listed until its version goes, but does not hold the
// version's manifest: with a budget of 1 MiB, under two manifests of 6,000
// files, reading another dataset after the fill pushes the filled one's
// manifest out of memory.
TEST_F(FillTest, AFinishedFillLetsTheCatalogDropItsManifest) {
  for (const char* name : {"filled", "read"}) {
    for (int i = 0; i < 6000; ++i) {
      WriteSourceFile(absl::StrCat(source_.path(), "/", name), absl::StrCat("f", i), "x");
    }
  }
  auto server = StartServer("on-read", 8, "manifest_memory_mib: 1\n");
  ASSERT_NE(server, nullptr);
  const v1::DatasetInfo filled =
      Register(*server, "filled", source_.path() + "/filled", kChunk, v1::FILL_ON_READ);
  const v1::DatasetInfo read =
      Register(*server, "read", source_.path() + "/read", kChunk, v1::FILL_NONE);

  ASSERT_TRUE(
      ReadChunk(server->SocketStub().get(), filled.version(), FileId(*server, "filled", "f0"), 0)
          .status.ok());
  ASSERT_TRUE(Await(
      [&] {
        return Describe(*server, "filled").cached_bytes() == filled.total_bytes() &&
               Metric(*server, "granary_fill_running") == 0;
      },
      60));
  ASSERT_TRUE(
      ReadChunk(server->SocketStub().get(), read.version(), FileId(*server, "read", "f0"), 0)
          .status.ok());
  EXPECT_EQ(Metric(*server, "granary_manifests_in_memory"), 1);
  EXPECT_LE(Metric(*server, "granary_manifest_memory_bytes"), 1 << 20);
}

}  // namespace
}  // namespace granary::testing
