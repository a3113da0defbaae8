// Helpers for granaryd's integration tests: source trees on disk and typed
// wrappers over the gRPC calls that keep the grpc::Status for code checks.
//
// Thread-safety: the call wrappers are safe to use concurrently with one stub.
#ifndef GRANARY_TESTS_SERVER_SERVER_TEST_UTIL_H_
#define GRANARY_TESTS_SERVER_SERVER_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "grpcpp/server.h"
#include "proto/granary.grpc.pb.h"
#include "tests/support/granaryd_process.h"

namespace granary::testing {

// `size` bytes that differ with `seed` and position, so misplaced bytes show.
std::string PatternBytes(size_t size, uint32_t seed);
// Writes `content` to root/relative, creating parent directories.
void WriteSourceFile(const std::string& root, const std::string& relative,
                     const std::string& content);

struct ReadResult {
  grpc::Status status;
  std::string data;
  bool from_cache = false;
  int messages = 0;
};
ReadResult ReadChunk(v1::Granary::Stub* stub, uint64_t version, uint64_t file_id,
                     uint32_t chunk_index, uint32_t offset = 0, uint32_t length = 0);
ReadResult ReadChunk(v1::Granary::Stub* stub, const v1::ReadChunkRequest& request);

// Reads a whole file of the manifest chunk by chunk; the first failing
// status, if any, in `status`.
ReadResult ReadWholeFile(v1::Granary::Stub* stub, uint64_t version, uint64_t file_id, uint64_t size,
                         uint32_t chunk_size);

// `replicas` 0: the server's default.
grpc::Status AddDataset(v1::Granary::Stub* stub, const std::string& name, const std::string& source,
                        uint32_t chunk_size, v1::DatasetInfo* info, uint32_t replicas = 0);

// The manifest of `name` (version 0: current), all pages concatenated.
grpc::Status GetManifest(v1::Granary::Stub* stub, const std::string& name, uint64_t version,
                         std::vector<v1::ManifestEntry>* entries, v1::DatasetInfo* info = nullptr);

// Every progress message of one prewarm.
grpc::Status Prewarm(v1::Granary::Stub* stub, const v1::PrewarmRequest& request,
                     std::vector<v1::PrewarmProgress>* progress);

// A real gRPC server whose Granary service implements no method: what a
// granaryd older than a call or protocol answers (UNIMPLEMENTED).
class ServerWithoutMethods {
 public:
  // Listens at `address` ("unix:PATH" or "HOST:PORT"); started() says whether it could.
  explicit ServerWithoutMethods(const std::string& address);
  ~ServerWithoutMethods();
  bool started() const { return server_ != nullptr; }

 private:
  v1::Granary::Service service_;
  std::unique_ptr<grpc::Server> server_;
};

// A fixture with a source directory and a real granaryd, started by
// StartServer(), with a stub over its Unix socket.
class GranarydTest : public ::testing::Test {
 protected:
  void StartServer(GranarydOptions options = {}) {
    auto server = GranarydProcess::Start(std::move(options));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    stub_ = server_->SocketStub();
  }

  // Writes `content` to the source as `relative`, registers the source as
  // dataset `name` in chunks of `chunk_size`, and sets `*version` and
  // `*file_id` to the version and the file's id in it.
  void RegisterOneFile(const std::string& name, const std::string& relative,
                       const std::string& content, uint32_t chunk_size, uint64_t* version,
                       uint64_t* file_id);

  TempDir source_;
  std::unique_ptr<GranarydProcess> server_;
  std::unique_ptr<v1::Granary::Stub> stub_;
};

}  // namespace granary::testing

#endif  // GRANARY_TESTS_SERVER_SERVER_TEST_UTIL_H_
