#include "tests/server/server_test_util.h"

#include <cstring>
#include <filesystem>
#include <fstream>

#include "common/dataset/chunk_math.h"
#include "grpcpp/client_context.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"

namespace granary::testing {

std::string PatternBytes(size_t size, uint32_t seed) {
  std::string bytes(size + 8, '\0');
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < size; i += 8) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    std::memcpy(bytes.data() + i, &state, 8);
  }
  bytes.resize(size);
  return bytes;
}

void WriteSourceFile(const std::string& root, const std::string& relative,
                     const std::string& content) {
  std::filesystem::path path = std::filesystem::path(root) / relative;
  std::filesystem::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(content.data(), static_cast<std::streamsize>(content.size()));
}

ReadResult ReadChunk(v1::Granary::Stub* stub, uint64_t version, uint64_t file_id,
                     uint32_t chunk_index, uint32_t offset, uint32_t length) {
  v1::ReadChunkRequest request;
  request.mutable_key()->set_dataset_version(version);
  request.mutable_key()->set_file_id(file_id);
  request.mutable_key()->set_chunk_index(chunk_index);
  request.set_offset(offset);
  request.set_length(length);
  return ReadChunk(stub, request);
}

ReadResult ReadChunk(v1::Granary::Stub* stub, const v1::ReadChunkRequest& request) {
  grpc::ClientContext context;
  auto reader = stub->ReadChunk(&context, request);
  ReadResult result;
  v1::ReadChunkResponse response;
  while (reader->Read(&response)) {
    if (result.messages++ == 0) result.from_cache = response.from_cache();
    result.data += response.data();
  }
  result.status = reader->Finish();
  return result;
}

ReadResult ReadWholeFile(v1::Granary::Stub* stub, uint64_t version, uint64_t file_id, uint64_t size,
                         uint32_t chunk_size) {
  ReadResult whole;
  for (uint64_t index = 0; index < ChunkCount(size, chunk_size); ++index) {
    ReadResult chunk = ReadChunk(stub, version, file_id, static_cast<uint32_t>(index));
    if (!chunk.status.ok()) {
      whole.status = chunk.status;
      return whole;
    }
    whole.data += chunk.data;
    whole.messages += chunk.messages;
  }
  return whole;
}

grpc::Status AddDataset(v1::Granary::Stub* stub, const std::string& name, const std::string& source,
                        uint32_t chunk_size, v1::DatasetInfo* info, uint32_t replicas) {
  v1::AddDatasetRequest request;
  request.set_name(name);
  request.set_source(source);
  request.set_chunk_size(chunk_size);
  request.set_replicas(replicas);
  grpc::ClientContext context;
  return stub->AddDataset(&context, request, info);
}

grpc::Status GetManifest(v1::Granary::Stub* stub, const std::string& name, uint64_t version,
                         std::vector<v1::ManifestEntry>* entries, v1::DatasetInfo* info) {
  v1::GetManifestRequest request;
  request.set_name(name);
  request.set_version(version);
  grpc::ClientContext context;
  auto reader = stub->GetManifest(&context, request);
  v1::ManifestPage page;
  while (reader->Read(&page)) {
    if (page.has_dataset() && info != nullptr) *info = page.dataset();
    entries->insert(entries->end(), page.entries().begin(), page.entries().end());
  }
  return reader->Finish();
}

grpc::Status Prewarm(v1::Granary::Stub* stub, const v1::PrewarmRequest& request,
                     std::vector<v1::PrewarmProgress>* progress) {
  grpc::ClientContext context;
  auto reader = stub->Prewarm(&context, request);
  v1::PrewarmProgress message;
  while (reader->Read(&message)) progress->push_back(message);
  return reader->Finish();
}

ServerWithoutMethods::ServerWithoutMethods(const std::string& address) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials());
  builder.RegisterService(&service_);
  server_ = builder.BuildAndStart();
}

ServerWithoutMethods::~ServerWithoutMethods() {
  if (server_ != nullptr) server_->Shutdown();
}

void GranarydTest::RegisterOneFile(const std::string& name, const std::string& relative,
                                   const std::string& content, uint32_t chunk_size,
                                   uint64_t* version, uint64_t* file_id) {
  WriteSourceFile(source_.path(), relative, content);
  v1::DatasetInfo info;
  grpc::Status added = AddDataset(stub_.get(), name, source_.path(), chunk_size, &info);
  ASSERT_TRUE(added.ok()) << added.error_message();
  *version = info.version();
  std::vector<v1::ManifestEntry> entries;
  ASSERT_TRUE(GetManifest(stub_.get(), name, 0, &entries).ok());
  for (uint64_t id = 0; id < entries.size(); ++id) {
    if (entries[id].path() == relative) *file_id = id;
  }
}

}  // namespace granary::testing
