// granaryd's read path measured end to end, in one run so the ratios compare
// like with like on a noisy machine:
//   hot:  ReadChunk of cached 4 MiB chunks through gRPC on the Unix socket,
//         against ChunkStore::Read of the same chunks in-process;
//   small: ReadChunk of 110 KiB of cached chunks (an image's size), one call
//         at a time, on the Unix socket and over TCP through gRPC, and over
//         TCP as peers read (DatasetClient: the peer read protocol): what a
//         read of a small file a peer holds costs in calls, not bytes;
//   cold: ReadChunk of chunks granaryd has not cached (read-through from a
//         posix source in the page cache, then stored), against pread of the
//         same ranges of the source directly;
//   registration: AddDataset of a tree of --register_files files (1 million
//         by default; 0 skips it).
// Prints the ratios after the table.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>

#include "cache_server/store/chunk_store.h"
#include "client/dataset_client.h"
#include "common/dataset/chunk_key.h"
#include "grpcpp/client_context.h"
#include "tests/support/granaryd_process.h"

namespace granary {
namespace {

constexpr uint32_t kChunk = 4u << 20;
// 192 MiB of source in all: the hot working set stays inside one store
// segment (256 MiB), so the hot figures are not a segment seal's fdatasync.
constexpr int kFiles = 24;
constexpr uint64_t kFileBytes = 2 * kChunk;

// The source tree, one granaryd, and a dataset over the tree, shared by every
// benchmark of the run.
struct Fixture {
  testing::TempDir source;
  std::unique_ptr<testing::GranarydProcess> server;
  std::unique_ptr<v1::Granary::Stub> stub;
  std::unique_ptr<v1::Granary::Stub> tcp_stub;
  int generation = 0;

  Fixture() {
    std::string block(kFileBytes, '\0');
    for (int f = 0; f < kFiles; ++f) {
      for (size_t i = 0; i < block.size(); i += 4096) block[i] = static_cast<char>(f + i / 4096);
      std::ofstream(Path(f), std::ios::binary).write(block.data(), block.size());
    }
    auto started = testing::GranarydProcess::Start();
    if (!started.ok()) {
      std::fprintf(stderr, "%s\n", std::string(started.status().message()).c_str());
      std::exit(1);
    }
    server = *std::move(started);
    stub = server->SocketStub();
    tcp_stub = server->TcpStub();
  }

  std::string Path(int f) const { return source.path() + "/f" + std::to_string(f); }

  // Registers the source under a fresh name, so none of its chunks is cached;
  // returns the version and the file ids of f0..f<kFiles-1>.
  std::pair<uint64_t, std::vector<uint64_t>> FreshDataset() {
    v1::AddDatasetRequest request;
    request.set_name("bench" + std::to_string(generation++));
    request.set_source(source.path());
    request.set_chunk_size(kChunk);
    v1::DatasetInfo info;
    grpc::ClientContext context;
    grpc::Status status = stub->AddDataset(&context, request, &info);
    if (!status.ok()) std::abort();
    v1::GetManifestRequest manifest_request;
    manifest_request.set_name(request.name());
    grpc::ClientContext manifest_context;
    auto reader = stub->GetManifest(&manifest_context, manifest_request);
    std::map<std::string, uint64_t> ids;
    v1::ManifestPage page;
    uint64_t next = 0;
    while (reader->Read(&page)) {
      for (const auto& entry : page.entries()) ids[entry.path()] = next++;
    }
    if (!reader->Finish().ok()) std::abort();
    std::vector<uint64_t> file_ids;
    // A char, not "f": GCC 12 at -O3 warns falsely (-Wrestrict) on a string
    // literal + std::string.
    for (int f = 0; f < kFiles; ++f) file_ids.push_back(ids.at('f' + std::to_string(f)));
    return {info.version(), file_ids};
  }
};

// Created by the first benchmark that needs it; main() destroys it, which
// stops the server and removes the temporary directories.
std::unique_ptr<Fixture> shared_fixture;

Fixture& Shared() {
  if (shared_fixture == nullptr) shared_fixture = std::make_unique<Fixture>();
  return *shared_fixture;
}

// Reads `length` bytes at `offset` of a chunk (0: to its end).
size_t ReadChunkOverGrpc(v1::Granary::Stub* stub, uint64_t version, uint64_t file_id,
                         uint32_t index, uint32_t offset = 0, uint32_t length = 0) {
  v1::ReadChunkRequest request;
  request.mutable_key()->set_dataset_version(version);
  request.mutable_key()->set_file_id(file_id);
  request.mutable_key()->set_chunk_index(index);
  request.set_offset(offset);
  request.set_length(length);
  grpc::ClientContext context;
  auto reader = stub->ReadChunk(&context, request);
  v1::ReadChunkResponse response;
  size_t bytes = 0;
  while (reader->Read(&response)) bytes += response.data().size();
  if (!reader->Finish().ok() || bytes != (length == 0 ? kChunk : length)) std::abort();
  return bytes;
}

constexpr int kChunksPerFile = kFileBytes / kChunk;
constexpr int kChunksPerDataset = kFiles * kChunksPerFile;

void BM_HotReadThroughGrpcUnixSocket(benchmark::State& state) {
  Fixture& fixture = Shared();
  auto [version, ids] = fixture.FreshDataset();
  for (int c = 0; c < kChunksPerDataset; ++c) {  // Warm every chunk.
    ReadChunkOverGrpc(fixture.stub.get(), version, ids[c / kChunksPerFile], c % kChunksPerFile);
  }
  int c = 0;
  for (auto _ : state) {
    ReadChunkOverGrpc(fixture.stub.get(), version, ids[c / kChunksPerFile], c % kChunksPerFile);
    c = (c + 1) % kChunksPerDataset;
  }
  state.SetBytesProcessed(state.iterations() * kChunk);
}
BENCHMARK(BM_HotReadThroughGrpcUnixSocket)->UseRealTime()->MinTime(2);

// 110 KiB at a time from cached chunks, walking through them; state.range(0)
// picks the transport: 0 the Unix socket, 1 TCP on loopback.
void BM_HotSmallReadThroughGrpc(benchmark::State& state) {
  constexpr uint32_t kSmallRead = 110 << 10;
  constexpr uint32_t kReadsPerChunk = kChunk / kSmallRead;
  Fixture& fixture = Shared();
  v1::Granary::Stub* stub = state.range(0) == 0 ? fixture.stub.get() : fixture.tcp_stub.get();
  auto [version, ids] = fixture.FreshDataset();
  for (int c = 0; c < kChunksPerDataset; ++c) {  // Warm every chunk.
    ReadChunkOverGrpc(fixture.stub.get(), version, ids[c / kChunksPerFile], c % kChunksPerFile);
  }
  uint64_t read = 0;
  for (auto _ : state) {
    const uint64_t c = read / kReadsPerChunk % kChunksPerDataset;
    ReadChunkOverGrpc(stub, version, ids[c / kChunksPerFile], c % kChunksPerFile,
                      read % kReadsPerChunk * kSmallRead, kSmallRead);
    ++read;
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * kSmallRead);
  state.SetLabel(state.range(0) == 0 ? "unix socket" : "tcp");
}
BENCHMARK(BM_HotSmallReadThroughGrpc)->Arg(0)->Arg(1)->UseRealTime()->MinTime(2);

// The same reads as a peer makes them: DatasetClient over TCP, with the
// cluster token, which speaks the peer read protocol.
void BM_HotSmallReadAsPeer(benchmark::State& state) {
  constexpr uint32_t kSmallRead = 110 << 10;
  constexpr uint32_t kReadsPerChunk = kChunk / kSmallRead;
  Fixture& fixture = Shared();
  auto [version, ids] = fixture.FreshDataset();
  for (int c = 0; c < kChunksPerDataset; ++c) {  // Warm every chunk.
    ReadChunkOverGrpc(fixture.stub.get(), version, ids[c / kChunksPerFile], c % kChunksPerFile);
  }
  DatasetClient::Options options;
  options.cluster_token = fixture.server->cluster_token();
  auto client = DatasetClient::Connect(fixture.server->tcp_address(), options);
  if (!client.ok()) std::abort();
  std::string buffer(kSmallRead, '\0');
  uint64_t read = 0;
  for (auto _ : state) {
    const uint64_t c = read / kReadsPerChunk % kChunksPerDataset;
    const ChunkKey key{version, ids[c / kChunksPerFile], static_cast<uint32_t>(c % kChunksPerFile)};
    if (!(*client)->ReadChunk(key, read % kReadsPerChunk * kSmallRead, buffer).ok()) std::abort();
    ++read;
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * kSmallRead);
  state.SetLabel("tcp, peer read protocol");
}
BENCHMARK(BM_HotSmallReadAsPeer)->UseRealTime()->MinTime(2);

void BM_HotReadStoreDirect(benchmark::State& state) {
  testing::TempDir dir;
  store::StoreOptions options;
  options.directories = {dir.path() + "/cache"};
  options.index_path = dir.path() + "/index";
  options.capacity_bytes = 2ull << 30;
  auto store = store::ChunkStore::Open(options);
  if (!store.ok()) std::abort();
  std::string data(kChunk, 'x');
  for (int c = 0; c < kChunksPerDataset; ++c) {
    data[0] = static_cast<char>(c);
    if (!(*store)->Insert(ChunkKey{1, static_cast<uint64_t>(c), 0}, kChunk, data).ok())
      std::abort();
  }
  int c = 0;
  for (auto _ : state) {
    auto read = (*store)->Read(ChunkKey{1, static_cast<uint64_t>(c), 0});
    if (!read.ok()) {
      state.SkipWithError(std::string(read.status().message()).c_str());
      break;
    }
    benchmark::DoNotOptimize(read->data());
    c = (c + 1) % kChunksPerDataset;
  }
  state.SetBytesProcessed(state.iterations() * kChunk);
}
BENCHMARK(BM_HotReadStoreDirect)->UseRealTime()->MinTime(2);

void BM_ColdReadThroughGrpcUnixSocket(benchmark::State& state) {
  Fixture& fixture = Shared();
  auto dataset = fixture.FreshDataset();
  int c = 0;
  for (auto _ : state) {
    if (c == kChunksPerDataset) {
      state.PauseTiming();
      dataset = fixture.FreshDataset();
      c = 0;
      state.ResumeTiming();
    }
    ReadChunkOverGrpc(fixture.stub.get(), dataset.first, dataset.second[c / kChunksPerFile],
                      c % kChunksPerFile);
    ++c;
  }
  state.SetBytesProcessed(state.iterations() * kChunk);
}
BENCHMARK(BM_ColdReadThroughGrpcUnixSocket)->UseRealTime()->MinTime(2);

void BM_ColdSourceDirect(benchmark::State& state) {
  Fixture& fixture = Shared();
  std::vector<int> fds;
  for (int f = 0; f < kFiles; ++f) fds.push_back(::open(fixture.Path(f).c_str(), O_RDONLY));
  std::string buffer(kChunk, '\0');
  int c = 0;
  for (auto _ : state) {
    ssize_t n = ::pread(fds[c / kChunksPerFile], buffer.data(), kChunk,
                        static_cast<off_t>(c % kChunksPerFile) * kChunk);
    if (n != static_cast<ssize_t>(kChunk)) std::abort();
    benchmark::DoNotOptimize(buffer.data());
    c = (c + 1) % kChunksPerDataset;
  }
  for (int fd : fds) ::close(fd);
  state.SetBytesProcessed(state.iterations() * kChunk);
}
BENCHMARK(BM_ColdSourceDirect)->UseRealTime()->MinTime(2);

int register_files = 1'000'000;

void BM_RegisterFiles(benchmark::State& state) {
  if (register_files == 0) {
    state.SkipWithError("skipped (--register_files=0)");
    return;
  }
  testing::TempDir tree;
  constexpr int kPerDir = 1000;
  for (int d = 0; d * kPerDir < register_files; ++d) {
    std::string dir = tree.path() + "/d" + std::to_string(d);
    std::filesystem::create_directory(dir);
    for (int f = 0; f < kPerDir && d * kPerDir + f < register_files; ++f) {
      int fd = ::open((dir + "/f" + std::to_string(f)).c_str(), O_WRONLY | O_CREAT, 0644);
      if (fd < 0 || ::write(fd, "x", 1) != 1) std::abort();
      ::close(fd);
    }
  }
  Fixture& fixture = Shared();
  for (auto _ : state) {
    v1::AddDatasetRequest request;
    request.set_name("tree" + std::to_string(fixture.generation++));
    request.set_source(tree.path());
    v1::DatasetInfo info;
    grpc::ClientContext context;
    grpc::Status status = fixture.stub->AddDataset(&context, request, &info);
    if (!status.ok() || info.file_count() != static_cast<uint64_t>(register_files)) std::abort();
  }
  state.counters["files"] = register_files;
}
BENCHMARK(BM_RegisterFiles)->Iterations(1)->UseRealTime()->Unit(benchmark::kSecond);

// Collects bytes/s per benchmark to print the ratios at the end.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& run : runs) {
      auto rate = run.counters.find("bytes_per_second");
      if (rate != run.counters.end()) rates_[run.benchmark_name()] = rate->second.value;
    }
  }
  void PrintRatio(const char* what, const std::string& a, const std::string& b) const {
    auto x = rates_.find(a), y = rates_.find(b);
    if (x == rates_.end() || y == rates_.end() || y->second == 0) return;
    std::printf("%s: %.1f MB/s / %.1f MB/s = %.3f\n", what, x->second / 1e6, y->second / 1e6,
                x->second / y->second);
  }

 private:
  std::map<std::string, double> rates_;
};

}  // namespace
}  // namespace granary

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--register_files=", 17) == 0) {
      granary::register_files = std::atoi(argv[i] + 17);
    }
  }
  benchmark::Initialize(&argc, argv);
  granary::RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.PrintRatio("hot: gRPC unix socket / store direct",
                      "BM_HotReadThroughGrpcUnixSocket/min_time:2.000/real_time",
                      "BM_HotReadStoreDirect/min_time:2.000/real_time");
  reporter.PrintRatio("cold: gRPC read-through / source pread",
                      "BM_ColdReadThroughGrpcUnixSocket/min_time:2.000/real_time",
                      "BM_ColdSourceDirect/min_time:2.000/real_time");
  granary::shared_fixture.reset();
  benchmark::Shutdown();
  return 0;
}
