// DatasetClient is a gRPC client of one granaryd for the readers of datasets
// (the FUSE client, `granary cat`): it lists datasets, fetches a dataset's
// manifest, and reads byte ranges of a manifest's files chunk by chunk through
// ReadChunk. It holds no policy: no retries, no fallback to the source, no
// caching; callers decide what to do with an error.
//
// Over TCP, chunk reads go over the peer read protocol on the same port
// (peer_read_protocol.h), which costs a small read a fraction of a gRPC call;
// a server that does not speak it is read over gRPC, and asked again a
// minute later. A read whose new peer read connection the server turns away
// (its budget of connections not yet authenticated, which anyone who reaches
// the port can fill, is full) is made over gRPC.
//
// Every RPC carries a deadline (Options). Errors are the server's status code
// and message, or the transport's (UNAVAILABLE when the server is unreachable,
// DEADLINE_EXCEEDED when it does not answer in time); a response that breaks
// the protocol (a short chunk, a manifest that does not hash to its version)
// is DATA_LOSS.
//
// Thread-safety: every method may be called concurrently from any thread.
#ifndef GRANARY_CLIENT_DATASET_CLIENT_H_
#define GRANARY_CLIENT_DATASET_CLIENT_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/peer_read_connections.h"
#include "common/dataset/chunk_key.h"
#include "common/dataset/manifest.h"
#include "proto/granary.grpc.pb.h"

namespace granary {

// One version of a dataset as a reader needs it: its description (source,
// chunk size, version) and its manifest, whose entry i is file id i.
struct DatasetSnapshot {
  v1::DatasetInfo info;
  Manifest manifest;
};

// Whether a server may read a chunk it does not hold from the source.
enum class ChunkSourcing {
  kReadThrough,  // Readers: a miss is fetched (through its owner when that is another node).
  kOwnerFetch,   // A non-owner asking the owner: a miss is fetched by the owner itself.
  kCacheOnly,    // Peers copying a chunk: a miss is NOT_FOUND.
};

// How a read request carries its sourcing, both ways.
void SetSourcing(ChunkSourcing sourcing, v1::ReadChunkRequest* request);
ChunkSourcing SourcingOf(const v1::ReadChunkRequest& request);

class DatasetClient {
 public:
  struct Options {
    // Deadline of small RPCs (ListDatasets, GetDataset).
    std::chrono::milliseconds metadata_timeout{5000};
    // Deadline of a whole GetManifest stream; manifests of millions of files
    // take a while to stream.
    std::chrono::milliseconds manifest_timeout{120000};
    // Deadline of one ReadChunk call (one chunk or part of one); a miss is
    // read through from the source, which may be slow.
    std::chrono::milliseconds read_timeout{30000};
    // Sent on every call when non-empty (common/net/cluster_token.h); TCP
    // servers of a cluster with a token require it.
    std::string cluster_token;
  };

  // Connects lazily: no RPC is made here. Fails with INVALID_ARGUMENT on a
  // malformed address (see common/net/server_address.h).
  static absl::StatusOr<std::unique_ptr<DatasetClient>> Connect(std::string_view address,
                                                                Options options);
  static absl::StatusOr<std::unique_ptr<DatasetClient>> Connect(std::string_view address) {
    return Connect(address, Options());
  }
  // A client over an existing channel to `address` (made with MakeChannel).
  static std::unique_ptr<DatasetClient> OverChannel(std::string_view address, Options options,
                                                    std::shared_ptr<grpc::Channel> channel);

  ~DatasetClient();
  DatasetClient(const DatasetClient&) = delete;
  DatasetClient& operator=(const DatasetClient&) = delete;

  const std::string& address() const { return address_; }

  absl::StatusOr<std::vector<v1::DatasetInfo>> ListDatasets() const;

  // The manifest of `version` of dataset `name` (0: the current version),
  // with every page fetched. Fails with the server's NOT_FOUND for an unknown
  // dataset or version, and DATA_LOSS if the entries do not rebuild the
  // version the server announced.
  absl::StatusOr<DatasetSnapshot> GetManifest(std::string_view name, uint64_t version = 0) const;

  // Reads `out.size()` bytes at `offset_in_chunk` of the chunk named by `key`
  // into `out`. The range must lie inside the chunk. Fails with DATA_LOSS if
  // the server returns more or fewer bytes.
  absl::Status ReadChunk(const ChunkKey& key, uint32_t offset_in_chunk, std::span<char> out,
                         ChunkSourcing sourcing = ChunkSourcing::kReadThrough) const;

  // One whole chunk to read with ReadChunks(): `out` is as long as the chunk.
  struct ChunkRead {
    ChunkKey key;
    std::span<char> out;
  };
  // Reads each of `reads` as ReadChunk(read.key, 0, read.out, sourcing) would,
  // and returns each one's status in order. Over TCP the reads are sent at
  // once on one peer read connection and answered back to back (at most
  // PeerReadConnections::kMaxPipelinedReads at a time); otherwise one after
  // another.
  std::vector<absl::Status> ReadChunks(std::span<const ChunkRead> reads,
                                       ChunkSourcing sourcing) const;

  // The cluster's members as the server sees them.
  absl::StatusOr<v1::GetMembersResponse> GetMembers() const;

 private:
  DatasetClient(std::string address, Options options, std::shared_ptr<grpc::Channel> channel);

  // The reads' results over the peer read protocol, or nothing when they are
  // to be made over gRPC (a Unix socket, or a server that does not speak it
  // or turned the connection away).
  std::optional<PeerReadConnections::Results> ReadOverPeerProtocol(
      std::span<const v1::ReadChunkRequest> requests, std::span<const std::span<char>> outs) const;
  absl::Status ReadChunkOverGrpc(const v1::ReadChunkRequest& request, std::span<char> out) const;

  const std::string address_;
  const Options options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Granary::Stub> stub_;
  // Null on a Unix socket.
  std::unique_ptr<PeerReadConnections> peer_reads_;
  // steady_clock ns before which reads go over gRPC (the server did not speak
  // the peer read protocol).
  mutable std::atomic<int64_t> grpc_reads_until_ns_{0};
};

}  // namespace granary

#endif  // GRANARY_CLIENT_DATASET_CLIENT_H_
