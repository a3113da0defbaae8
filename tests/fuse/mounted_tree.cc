#include "tests/fuse/mounted_tree.h"

#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "grpcpp/client_context.h"

namespace granary::testing {

std::string RandomBytes(size_t size, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string bytes(size, '\0');
  for (size_t i = 0; i < size; i += 8) {
    uint64_t word = rng();
    std::memcpy(bytes.data() + i, &word, std::min<size_t>(8, size - i));
  }
  return bytes;
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

std::string ReadWhole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::pair<int, std::string> Shell(const std::string& command) {
  std::string output;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) output.append(buffer, n);
  int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

absl::Status AddDataset(GranarydProcess& server, const std::string& name,
                        const std::string& source) {
  auto stub = server.SocketStub();
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  v1::AddDatasetRequest request;
  request.set_name(name);
  request.set_source(source);
  request.set_chunk_size(kChunk);
  v1::DatasetInfo info;
  grpc::Status status = stub->AddDataset(&context, request, &info);
  if (!status.ok()) return absl::InternalError("AddDataset: " + status.error_message());
  return absl::OkStatus();
}

absl::StatusOr<v1::DatasetInfo> GetDataset(GranarydProcess& server, const std::string& name) {
  auto stub = server.SocketStub();
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::GetDatasetRequest request;
  request.set_name(name);
  v1::DatasetInfo info;
  grpc::Status status = stub->GetDataset(&context, request, &info);
  if (!status.ok()) return absl::InternalError("GetDataset: " + status.error_message());
  return info;
}

void MountedTree::SetUp() {
  source_ = source_dir_.path() + "/src";
  BuildTree();
  if (HasFatalFailure()) return;
  auto server = GranarydProcess::Start({.extra_args = ServerArgs()});
  ASSERT_TRUE(server.ok()) << server.status();
  server_ = *std::move(server);
  ASSERT_TRUE(AddDataset(*server_, "ds", source_).ok());
  Mount();
}

void MountedTree::Mount() {
  auto mount = FuseMount::Start(server_->socket_address(), MountArgs(), "ds");
  ASSERT_TRUE(mount.ok()) << mount.status();
  mount_ = *std::move(mount);
  mounted_ = mount_->path() + "/ds";
}

}  // namespace granary::testing
