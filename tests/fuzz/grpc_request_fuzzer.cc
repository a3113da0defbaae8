// Fuzzes granaryd's request validation through its real gRPC service: one
// GranaryServer runs in this process on a temporary data directory, with the
// dataset "fuzz" registered over a small source tree, and every input is one
// request sent over its Unix socket. The input's first byte picks the call
// (ReadChunk, Prewarm, AddDataset); the rest is the serialized request.
//
// So that saved inputs mean the same on every machine (the dataset's version
// hashes its source path, which is a fresh temporary directory):
//  - a ReadChunk key's dataset_version is taken relative to the version of
//    "fuzz" (XOR): 0 names it, every other value another version;
//  - AddDataset sources are read inside the sandbox of source trees:
//    "posix:///data" and "/data" name the tree of "fuzz". A source whose ".."
//    would lead out of the sandbox is not sent (the input is rejected), so the
//    fuzzer never scans the machine. No S3 endpoint is allowed, so an s3://
//    source is refused (PERMISSION_DENIED, or a caller's error found first)
//    before any request leaves the process.
//
// Properties: every call answers OK or a caller's-error code (never INTERNAL,
// UNKNOWN, UNAVAILABLE or DATA_LOSS; a call that hangs is a libFuzzer
// timeout); bytes read are the source's bytes at the requested range; a
// successful prewarm ends with a finished progress message that accounts for
// every chunk; a registration answers with the requested name and chunk size.
#include <stdlib.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cache_server/config/config.h"
#include "cache_server/server.h"
#include "common/dataset/chunk_math.h"
#include "common/net/server_address.h"
#include "grpcpp/grpcpp.h"
#include "proto/granary.grpc.pb.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/server/server_test_util.h"

namespace granary {
namespace {

namespace fs = std::filesystem;
using testing::PatternBytes;
using testing::WriteSourceFile;

constexpr char kDataset[] = "fuzz";
constexpr uint32_t kChunkSize = 1 << 20;

enum class Call : uint8_t { kReadChunk, kPrewarm, kAddDataset, kCount };

// The in-process server and what the properties compare against.
struct Fixture {
  std::string sandbox;  // Source trees; "fuzz" reads sandbox/data.
  std::unique_ptr<GranaryServer> server;
  std::unique_ptr<v1::Granary::Stub> stub;
  v1::DatasetInfo info;
  std::vector<v1::ManifestEntry> entries;
};

Fixture* StartFixture() {
  // One line per registration or prewarm would drown libFuzzer's output.
  ::setenv("GRANARY_LOG_LEVEL", "error", /*overwrite=*/0);
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern =
      absl::StrCat(tmp != nullptr && tmp[0] != '\0' ? tmp : "/tmp", "/granary-fuzz-XXXXXX");
  GRANARY_FUZZ_CHECK(::mkdtemp(pattern.data()) != nullptr, pattern);
  static std::string root = pattern;
  std::atexit([] {
    std::error_code ignored;
    fs::remove_all(root, ignored);
  });

  auto* fixture = new Fixture;
  fixture->sandbox = root + "/sources";
  std::string data = fixture->sandbox + "/data";
  WriteSourceFile(data, "a.bin", PatternBytes(5 * kChunkSize / 2, 1));
  WriteSourceFile(data, "dir/b.txt", "granary fuzz\n");
  WriteSourceFile(data, "dir/sub/c.bin", PatternBytes(kChunkSize, 2));
  WriteSourceFile(data, "empty", "");
  fs::create_symlink("a.bin", data + "/link");
  fs::create_directories(fixture->sandbox + "/other");

  GranarydConfig config = DefaultGranarydConfig();
  config.data_dir = root + "/state";
  config.socket_path = root + "/granaryd.sock";
  config.metrics_listen = "127.0.0.1:0";
  config.capacity_bytes = 256 << 20;
  config.source_roots = {fixture->sandbox};
  absl::StatusOr<std::unique_ptr<GranaryServer>> server = GranaryServer::Start(config);
  GRANARY_FUZZ_CHECK(server.ok(), server.status().ToString());
  fixture->server = *std::move(server);
  fixture->stub = v1::Granary::NewStub(*MakeChannel("unix:" + config.socket_path));
  grpc::Status added =
      testing::AddDataset(fixture->stub.get(), kDataset, data, kChunkSize, &fixture->info);
  GRANARY_FUZZ_CHECK(added.ok(), added.error_message());
  grpc::Status manifest = testing::GetManifest(fixture->stub.get(), kDataset, 0, &fixture->entries);
  GRANARY_FUZZ_CHECK(manifest.ok(), manifest.error_message());
  return fixture;
}

void CheckCode(const grpc::Status& status, const std::string& call) {
  switch (status.error_code()) {
    case grpc::StatusCode::OK:
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::NOT_FOUND:
    case grpc::StatusCode::ALREADY_EXISTS:
    case grpc::StatusCode::OUT_OF_RANGE:
    case grpc::StatusCode::FAILED_PRECONDITION:
      return;
    default:
      GRANARY_FUZZ_CHECK(false, absl::StrCat(call, " answered code ", status.error_code(), ": ",
                                             status.error_message()));
  }
}

// The bytes of [offset, offset + length) of `entry`'s chunk `index`, read from
// the source tree (length 0: to the chunk's end).
std::string SourceBytes(const Fixture& fixture, const v1::ManifestEntry& entry, uint32_t index,
                        uint64_t offset, uint64_t length) {
  uint64_t chunk_length = ChunkLength(entry.size(), kChunkSize, index);
  uint64_t end = length == 0 ? chunk_length : std::min(chunk_length, offset + length);
  std::ifstream in(fixture.sandbox + "/data/" + entry.path(), std::ios::binary);
  in.seekg(static_cast<std::streamoff>(uint64_t{index} * kChunkSize + offset));
  std::string bytes(end - offset, '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return bytes;
}

void FuzzReadChunk(const Fixture& fixture, v1::ReadChunkRequest request) {
  const uint64_t relative = request.key().dataset_version();
  request.mutable_key()->set_dataset_version(relative ^ fixture.info.version());
  testing::ReadResult read = testing::ReadChunk(fixture.stub.get(), request);
  CheckCode(read.status, "ReadChunk");
  if (!read.status.ok()) return;
  GRANARY_FUZZ_CHECK(relative == 0 && request.key().file_id() < fixture.entries.size(),
                     "read a chunk of a dataset nobody registered");
  const v1::ManifestEntry& entry = fixture.entries[request.key().file_id()];
  GRANARY_FUZZ_CHECK(read.data == SourceBytes(fixture, entry, request.key().chunk_index(),
                                              request.offset(), request.length()),
                     absl::StrCat("wrong bytes of ", entry.path()));
}

void FuzzPrewarm(const Fixture& fixture, const v1::PrewarmRequest& request) {
  std::vector<v1::PrewarmProgress> progress;
  grpc::Status status = testing::Prewarm(fixture.stub.get(), request, &progress);
  CheckCode(status, "Prewarm");
  if (!status.ok()) return;
  GRANARY_FUZZ_CHECK(!progress.empty() && progress.back().finished(), request.name());
  const v1::PrewarmProgress& last = progress.back();
  GRANARY_FUZZ_CHECK(last.chunks_already_cached() <= last.chunks_done() &&
                         last.chunks_done() <= last.chunks_total() &&
                         last.bytes_done() <= last.bytes_total(),
                     last.ShortDebugString());
  // Only a failed file leaves chunks undone.
  GRANARY_FUZZ_CHECK(last.failures_size() > 0 || (last.chunks_done() == last.chunks_total() &&
                                                  last.bytes_done() == last.bytes_total()),
                     last.ShortDebugString());
}

// `source` with its path moved into the sandbox; nullopt if ".." leads out.
std::optional<std::string> Confine(const std::string& source, const std::string& sandbox) {
  std::string scheme = source.starts_with("posix://") ? "posix://" : "";
  std::string path = source.substr(scheme.size());
  if (!path.starts_with('/')) return source;  // Not an absolute path: refused as it is.
  std::string resolved = fs::path(sandbox + path).lexically_normal().string();
  if (resolved != sandbox && !resolved.starts_with(sandbox + "/")) return std::nullopt;
  return scheme + sandbox + path;
}

int FuzzAddDataset(const Fixture& fixture, const v1::AddDatasetRequest& request) {
  v1::DatasetInfo info;
  if (request.source().starts_with("s3://")) {
    grpc::Status status = testing::AddDataset(fixture.stub.get(), request.name(), request.source(),
                                              request.chunk_size(), &info);
    GRANARY_FUZZ_CHECK(!status.ok(), "an S3 source was registered with no endpoint allowed");
    if (status.error_code() != grpc::StatusCode::PERMISSION_DENIED) {
      CheckCode(status, "AddDataset");
    }
    return 0;
  }
  std::optional<std::string> source = Confine(request.source(), fixture.sandbox);
  if (!source.has_value()) return -1;
  grpc::Status status =
      testing::AddDataset(fixture.stub.get(), request.name(), *source, request.chunk_size(), &info);
  CheckCode(status, "AddDataset");
  if (!status.ok()) return 0;
  GRANARY_FUZZ_CHECK(info.name() == request.name(), info.name());
  GRANARY_FUZZ_CHECK(
      info.chunk_size() == (request.chunk_size() == 0 ? kDefaultChunkSize : request.chunk_size()),
      info.ShortDebugString());
  return 0;
}

}  // namespace
}  // namespace granary

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace granary;
  static const Fixture* fixture = StartFixture();
  if (size == 0) return -1;
  const auto call = static_cast<Call>(data[0] % static_cast<uint8_t>(Call::kCount));
  const uint8_t* body = data + 1;
  const int body_size = static_cast<int>(size - 1);
  switch (call) {
    case Call::kReadChunk: {
      v1::ReadChunkRequest request;
      if (!request.ParseFromArray(body, body_size)) return -1;
      FuzzReadChunk(*fixture, request);
      return 0;
    }
    case Call::kPrewarm: {
      v1::PrewarmRequest request;
      if (!request.ParseFromArray(body, body_size)) return -1;
      FuzzPrewarm(*fixture, request);
      return 0;
    }
    case Call::kAddDataset: {
      v1::AddDatasetRequest request;
      if (!request.ParseFromArray(body, body_size)) return -1;
      return FuzzAddDataset(*fixture, request);
    }
    case Call::kCount:
      break;
  }
  return -1;
}
