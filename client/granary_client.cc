#include "client/granary_client.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "client/whole_file_reads.h"
#include "common/base/file_util.h"
#include "common/base/status.h"
#include "common/net/defaults.h"
#include "common/net/server_address.h"

namespace granary {
namespace {

// A batch waits for granaryd this long at most: a cold batch fetches up to
// kMaxBatchFiles files from the source first.
constexpr std::chrono::minutes kBatchTimeout{5};
// Paths of one request at most, in bytes: the request is one datagram.
constexpr size_t kMaxBatchPathBytes = kMaxLocalReadMessageBytes / 2;

}  // namespace

absl::StatusOr<std::unique_ptr<GranaryClient>> GranaryClient::Connect(Options options) {
  std::string socket_path =
      options.socket_path.empty() ? DefaultClientSocketPath() : options.socket_path;
  GRANARY_RETURN_IF_ERROR(UnixSocketAddress(socket_path).status());
  return std::unique_ptr<GranaryClient>(new GranaryClient(std::move(options), socket_path));
}

GranaryClient::GranaryClient(Options options, std::string socket_path)
    : options_(std::move(options)),
      socket_path_(std::move(socket_path)),
      local_(LocalReadSocketPath(socket_path_), kBatchTimeout) {}

GranaryClient::~GranaryClient() = default;

absl::StatusOr<DatasetClient*> GranaryClient::Rpc() {
  MutexLock lock(&mutex_);
  if (rpc_ == nullptr || rpc_owner_ != ::getpid()) {
    // A channel made before a fork is left to the parent, not used.
    if (rpc_owner_ != ::getpid()) rpc_.release();
    GRANARY_ASSIGN_OR_RETURN(rpc_, DatasetClient::Connect(absl::StrCat("unix:", socket_path_)));
    rpc_owner_ = ::getpid();
  }
  return rpc_.get();
}

absl::StatusOr<GranaryClient::OpenedBatch> GranaryClient::OpenMany(
    std::string_view dataset, std::span<const std::string> paths, uint64_t version) {
  OpenedBatch batch;
  batch.dataset = std::string(dataset);
  batch.dataset_version = version;
  batch.files.reserve(paths.size());
  size_t next = 0;
  do {
    v1::BatchRequest request;
    request.set_dataset(batch.dataset);
    // Every request after the first asks for the version the first answered.
    request.set_dataset_version(batch.dataset_version);
    request.set_read_through(options_.read_through);
    size_t path_bytes = 0;
    while (next < paths.size() && request.paths_size() < static_cast<int>(kMaxBatchFiles) &&
           (request.paths_size() == 0 || path_bytes + paths[next].size() <= kMaxBatchPathBytes)) {
      path_bytes += paths[next].size();
      request.add_paths(paths[next++]);
    }
    GRANARY_ASSIGN_OR_RETURN(LocalChunkReader::Batch answered, local_.ReadBatch(request));
    batch.dataset_version = answered.answer.dataset_version();
    batch.chunk_size = answered.answer.chunk_size();
    size_t fd = 0;
    for (const v1::BatchFile& file : answered.answer.files()) {
      OpenedFile& opened = batch.files.emplace_back();
      opened.status = absl::Status(static_cast<absl::StatusCode>(file.code()), file.message());
      opened.size = file.size();
      opened.file_id = file.file_id();
      opened.by_ranges = file.read_by_ranges();
      if (opened.by_ranges) opened.status = absl::OkStatus();
      if (file.code() == 0 && file.size() > 0) opened.fd = std::move(answered.fds[fd++]);
    }
  } while (next < paths.size());
  return batch;
}

void GranaryClient::ReadOpened(OpenedBatch& batch, std::span<char* const> outs) {
  std::vector<WholeFileRead> reads;
  std::vector<size_t> read_files;
  for (size_t i = 0; i < batch.files.size(); ++i) {
    OpenedFile& file = batch.files[i];
    if (!file.status.ok() || file.size == 0) continue;
    if (file.by_ranges) {
      file.status =
          ReadRange(batch.dataset_version, file.file_id, batch.chunk_size, 0, {outs[i], file.size});
      continue;
    }
    reads.push_back({file.fd.get(), file.size, outs[i], {}});
    read_files.push_back(i);
  }
  ReadWholeFiles(reads);
  for (size_t r = 0; r < reads.size(); ++r) batch.files[read_files[r]].status = reads[r].status;
}

absl::StatusOr<std::vector<absl::StatusOr<std::string>>> GranaryClient::ReadMany(
    std::string_view dataset, std::span<const std::string> paths, uint64_t version) {
  GRANARY_ASSIGN_OR_RETURN(OpenedBatch batch, OpenMany(dataset, paths, version));
  std::vector<std::string> data(batch.files.size());
  std::vector<char*> outs(batch.files.size());
  for (size_t i = 0; i < batch.files.size(); ++i) {
    if (batch.files[i].status.ok()) data[i].resize(batch.files[i].size);
    outs[i] = data[i].data();
  }
  ReadOpened(batch, outs);
  std::vector<absl::StatusOr<std::string>> read;
  read.reserve(batch.files.size());
  for (size_t i = 0; i < batch.files.size(); ++i) {
    if (batch.files[i].status.ok()) {
      read.emplace_back(std::move(data[i]));
    } else {
      read.emplace_back(batch.files[i].status);
    }
  }
  return read;
}

absl::StatusOr<std::unique_ptr<GranaryFile>> GranaryClient::Open(std::string_view dataset,
                                                                 std::string_view path,
                                                                 uint64_t version) {
  const std::string paths[] = {std::string(path)};
  GRANARY_ASSIGN_OR_RETURN(OpenedBatch batch, OpenMany(dataset, paths, version));
  OpenedFile& file = batch.files.front();
  GRANARY_RETURN_IF_ERROR(file.status);
  return std::unique_ptr<GranaryFile>(new GranaryFile(this, batch.dataset_version, batch.chunk_size,
                                                      file.file_id, file.size, std::move(file.fd)));
}

absl::StatusOr<std::vector<v1::DatasetInfo>> GranaryClient::Datasets() {
  GRANARY_ASSIGN_OR_RETURN(DatasetClient * rpc, Rpc());
  return rpc->ListDatasets();
}

absl::StatusOr<DatasetSnapshot> GranaryClient::Manifest(std::string_view dataset,
                                                        uint64_t version) {
  GRANARY_ASSIGN_OR_RETURN(DatasetClient * rpc, Rpc());
  return rpc->GetManifest(dataset, version);
}

absl::Status GranaryClient::ReadRange(uint64_t version, uint64_t file_id, uint32_t chunk_size,
                                      uint64_t offset, std::span<char> out) {
  if (chunk_size == 0) return absl::InvalidArgumentError("a ranged read of chunks of 0 bytes");
  GRANARY_ASSIGN_OR_RETURN(DatasetClient * rpc, Rpc());
  while (!out.empty()) {
    const uint32_t in_chunk = static_cast<uint32_t>(offset % chunk_size);
    const size_t length = std::min<uint64_t>(out.size(), chunk_size - in_chunk);
    const ChunkKey key{version, file_id, static_cast<uint32_t>(offset / chunk_size)};
    GRANARY_RETURN_IF_ERROR(rpc->ReadChunk(key, in_chunk, out.first(length)));
    out = out.subspan(length);
    offset += length;
  }
  return absl::OkStatus();
}

absl::StatusOr<size_t> GranaryFile::ReadAt(uint64_t offset, std::span<char> out) {
  if (offset >= size_) return 0;
  out = out.first(std::min<uint64_t>(out.size(), size_ - offset));
  if (fd_.valid()) {
    GRANARY_ASSIGN_OR_RETURN(
        size_t read, PreadUntilFullOrEnd(fd_.get(), offset, out, "reading a dataset's file"));
    if (read != out.size()) {
      return absl::DataLossError(
          absl::StrCat("file ", file_id_, " ended at ", offset + read, " of ", size_, " bytes"));
    }
    return read;
  }
  GRANARY_RETURN_IF_ERROR(client_->ReadRange(version_, file_id_, chunk_size_, offset, out));
  return out.size();
}

}  // namespace granary
