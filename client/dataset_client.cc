#include "client/dataset_client.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/absl_compat.h"
#include "common/base/status.h"
#include "common/jobs/read_origin.h"
#include "common/net/server_address.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/sync_stream.h"

namespace granary {
namespace {

// How long reads go over gRPC after a server did not speak the peer read
// protocol (an older granaryd, until it is upgraded).
constexpr std::chrono::nanoseconds kGrpcReadsAfterRefusal = std::chrono::minutes(1);

void SetDeadline(grpc::ClientContext* context, std::chrono::milliseconds timeout) {
  context->set_deadline(std::chrono::system_clock::now() + timeout);
}

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

v1::ReadChunkRequest ChunkRequest(const ChunkKey& key, uint32_t offset_in_chunk, size_t length,
                                  ChunkSourcing sourcing) {
  v1::ReadChunkRequest request;
  key.ToProto(request.mutable_key());
  request.set_offset(offset_in_chunk);
  request.set_length(static_cast<uint32_t>(length));
  SetSourcing(sourcing, &request);
  return request;
}

}  // namespace

void SetSourcing(ChunkSourcing sourcing, v1::ReadChunkRequest* request) {
  request->set_cache_only(sourcing == ChunkSourcing::kCacheOnly);
  request->set_owner_fetch(sourcing == ChunkSourcing::kOwnerFetch);
}

ChunkSourcing SourcingOf(const v1::ReadChunkRequest& request) {
  if (request.cache_only()) return ChunkSourcing::kCacheOnly;
  return request.owner_fetch() ? ChunkSourcing::kOwnerFetch : ChunkSourcing::kReadThrough;
}

absl::StatusOr<std::unique_ptr<DatasetClient>> DatasetClient::Connect(std::string_view address,
                                                                      Options options) {
  GRANARY_ASSIGN_OR_RETURN(auto channel, MakeChannel(address, options.cluster_token));
  return OverChannel(address, std::move(options), std::move(channel));
}

std::unique_ptr<DatasetClient> DatasetClient::OverChannel(std::string_view address, Options options,
                                                          std::shared_ptr<grpc::Channel> channel) {
  return std::unique_ptr<DatasetClient>(
      new DatasetClient(std::string(address), std::move(options), std::move(channel)));
}

DatasetClient::DatasetClient(std::string address, Options options,
                             std::shared_ptr<grpc::Channel> channel)
    : address_(std::move(address)),
      options_(options),
      channel_(std::move(channel)),
      stub_(v1::Granary::NewStub(channel_)) {
  if (!address_.starts_with("unix:")) {
    peer_reads_ = std::make_unique<PeerReadConnections>(address_, options_.cluster_token,
                                                        options_.read_timeout);
  }
}

DatasetClient::~DatasetClient() = default;

absl::StatusOr<std::vector<v1::DatasetInfo>> DatasetClient::ListDatasets() const {
  grpc::ClientContext context;
  SetDeadline(&context, options_.metadata_timeout);
  v1::ListDatasetsResponse response;
  GRANARY_RETURN_IF_ERROR(
      FromGrpcStatus(stub_->ListDatasets(&context, v1::ListDatasetsRequest(), &response)));
  return std::vector<v1::DatasetInfo>(response.datasets().begin(), response.datasets().end());
}

absl::StatusOr<DatasetSnapshot> DatasetClient::GetManifest(std::string_view name,
                                                           uint64_t version) const {
  grpc::ClientContext context;
  SetDeadline(&context, options_.manifest_timeout);
  v1::GetManifestRequest request;
  request.set_name(std::string(name));
  request.set_version(version);
  std::unique_ptr<grpc::ClientReader<v1::ManifestPage>> reader =
      stub_->GetManifest(&context, request);

  v1::DatasetInfo info;
  ManifestEntries entries;
  v1::ManifestPage page;
  bool first = true;
  absl::Status bad_entry;
  while (reader->Read(&page)) {
    if (first) {
      info = std::move(*page.mutable_dataset());
      entries.reserve(info.file_count() + info.directory_count() + 1);
      first = false;
    }
    for (v1::ManifestEntry& proto : *page.mutable_entries()) {
      if (entries.size() == kMaxManifestEntries) {
        bad_entry = absl::OutOfRangeError(absl::StrCat("manifest of dataset '", AsAbsl(name),
                                                       "' has more than ", kMaxManifestEntries,
                                                       " entries"));
        break;
      }
      absl::StatusOr<ManifestEntry> entry = ManifestEntry::FromProto(std::move(proto));
      if (!entry.ok()) {
        bad_entry = entry.status();
        break;
      }
      entries.push_back(*std::move(entry));
    }
    if (!bad_entry.ok()) {
      context.TryCancel();
      break;
    }
  }
  absl::Status finished = FromGrpcStatus(reader->Finish());
  GRANARY_RETURN_IF_ERROR(bad_entry);
  GRANARY_RETURN_IF_ERROR(finished);
  if (first) {
    return absl::DataLossError(absl::StrCat(
        "server ", address_, " sent no manifest page for dataset '", AsAbsl(name), "'"));
  }
  // File ids are positions in the server's order; Build() sorts by path, so
  // the two agree only if the server's order already was sorted.
  for (size_t i = 1; i < entries.size(); ++i) {
    if (!(entries[i - 1].path < entries[i].path)) {
      return absl::DataLossError(absl::StrCat("manifest of dataset '", AsAbsl(name),
                                              "' is not sorted by path at entry ", i, " ('",
                                              entries[i].path, "')"));
    }
  }
  GRANARY_ASSIGN_OR_RETURN(
      Manifest manifest,
      Manifest::Build(DatasetIdentity{info.name(), info.source(), info.chunk_size()},
                      std::move(entries)));
  uint64_t expected = version != 0 ? version : info.version();
  if (manifest.version() != expected) {
    return absl::DataLossError(absl::StrCat(
        "manifest of dataset '", AsAbsl(name), "' hashes to version ",
        FormatVersion(manifest.version()), ", not the announced ", FormatVersion(expected)));
  }
  return DatasetSnapshot{std::move(info), std::move(manifest)};
}

absl::StatusOr<v1::GetMembersResponse> DatasetClient::GetMembers() const {
  grpc::ClientContext context;
  SetDeadline(&context, options_.metadata_timeout);
  v1::GetMembersResponse response;
  GRANARY_RETURN_IF_ERROR(
      FromGrpcStatus(stub_->GetMembers(&context, v1::GetMembersRequest(), &response)));
  return response;
}

std::vector<absl::Status> DatasetClient::ReadChunks(std::span<const ChunkRead> reads,
                                                    ChunkSourcing sourcing) const {
  std::vector<absl::Status> statuses;
  statuses.reserve(reads.size());
  for (size_t begin = 0; begin < reads.size(); begin += PeerReadConnections::kMaxPipelinedReads) {
    const std::span<const ChunkRead> part = reads.subspan(
        begin, std::min(reads.size() - begin, PeerReadConnections::kMaxPipelinedReads));
    std::vector<v1::ReadChunkRequest> requests(part.size());
    std::vector<std::span<char>> outs(part.size());
    for (size_t i = 0; i < part.size(); ++i) {
      requests[i] = ChunkRequest(part[i].key, 0, part[i].out.size(), sourcing);
      outs[i] = part[i].out;
    }
    std::optional<PeerReadConnections::Results> read = ReadOverPeerProtocol(requests, outs);
    for (size_t i = 0; i < part.size(); ++i) {
      statuses.push_back(read ? std::move(read->statuses[i])
                              : ReadChunkOverGrpc(requests[i], part[i].out));
    }
  }
  return statuses;
}

std::optional<PeerReadConnections::Results> DatasetClient::ReadOverPeerProtocol(
    std::span<const v1::ReadChunkRequest> requests, std::span<const std::span<char>> outs) const {
  if (peer_reads_ == nullptr) return std::nullopt;
  const int64_t now = NowNs();
  if (now < grpc_reads_until_ns_.load(std::memory_order_relaxed)) return std::nullopt;
  PeerReadConnections::Results read = peer_reads_->ReadMany(requests, outs);
  switch (read.outcome) {
    case PeerReadConnections::Outcome::kRead:
      return read;
    case PeerReadConnections::Outcome::kNotSpoken:
      grpc_reads_until_ns_.store(now + kGrpcReadsAfterRefusal.count(), std::memory_order_relaxed);
      break;
    case PeerReadConnections::Outcome::kTurnedAway:
      break;
  }
  return std::nullopt;
}

absl::Status DatasetClient::ReadChunk(const ChunkKey& key, uint32_t offset_in_chunk,
                                      std::span<char> out, ChunkSourcing sourcing) const {
  if (out.empty()) return absl::OkStatus();
  const v1::ReadChunkRequest request = ChunkRequest(key, offset_in_chunk, out.size(), sourcing);
  const std::span<char> outs[] = {out};
  std::optional<PeerReadConnections::Results> read =
      ReadOverPeerProtocol(std::span(&request, 1), outs);
  if (read) return read->statuses[0];
  return ReadChunkOverGrpc(request, out);
}

absl::Status DatasetClient::ReadChunkOverGrpc(const v1::ReadChunkRequest& request,
                                              std::span<char> out) const {
  if (out.empty()) return absl::OkStatus();
  const ChunkKey key = ChunkKey::FromProto(request.key());
  const uint32_t offset_in_chunk = request.offset();
  grpc::ClientContext context;
  SetDeadline(&context, options_.read_timeout);
  std::unique_ptr<grpc::ClientReader<v1::ReadChunkResponse>> reader =
      stub_->ReadChunk(&context, request);

  v1::ReadChunkResponse piece;
  size_t received = 0;
  bool overflow = false;
  while (reader->Read(&piece)) {
    // Only the first message says whether the chunk was a hit.
    if (received == 0 && !piece.from_cache()) NoteReadOrigin(ReadOrigin::kSource);
    const std::string& data = piece.data();
    if (data.size() > out.size() - received) {
      overflow = true;
      context.TryCancel();
      break;
    }
    std::memcpy(out.data() + received, data.data(), data.size());
    received += data.size();
  }
  absl::Status finished = FromGrpcStatus(reader->Finish());
  if (overflow) {
    return absl::DataLossError(absl::StrCat("server ", address_, " sent more than ", out.size(),
                                            " bytes for chunk ", key.ToString()));
  }
  GRANARY_RETURN_IF_ERROR(finished);
  if (received != out.size()) {
    return absl::DataLossError(absl::StrCat("server ", address_, " sent ", received, " of ",
                                            out.size(), " bytes for chunk ", key.ToString(),
                                            " at offset ", offset_in_chunk));
  }
  return absl::OkStatus();
}

}  // namespace granary
