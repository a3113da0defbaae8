// GranaryClient is libgranary: how a program on a node reads datasets from
// its granaryd without a mount, where FUSE is missing or costs too much per
// file (the Python package `granary` is built on it; granary_c.h is its C
// ABI). It needs only granaryd's Unix socket: the gRPC socket for listings
// and ranged reads, and the local read socket beside it for batches.
//
// ReadMany reads a batch of whole files with one request per kMaxBatchFiles
// paths: granaryd checks each file against the caller's uid and groups and
// hands over a descriptor of its verified cache copy (fetching misses first),
// and the client reads every file of the batch at once (whole_file_reads.h).
// A file granaryd does not hand over whole (too large to fetch whole, or not
// stored whole) is read by ranges over gRPC, as `granary cat` reads, verified
// by granaryd. Each file gets its own status: one refused or missing file
// does not fail the others.
//
// Open() gives a file object for ranged reads of one file, large or small.
//
// Every call names its dataset by name and reads its current version unless
// a version is given. A process forked after a client was made (a DataLoader
// worker) may keep using it: connections are made again in the child.
//
// Thread-safety: every method may be called concurrently.
#ifndef GRANARY_CLIENT_GRANARY_CLIENT_H_
#define GRANARY_CLIENT_GRANARY_CLIENT_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/dataset_client.h"
#include "common/base/mutex.h"
#include "common/base/unique_fd.h"
#include "common/net/local_read_socket.h"

namespace granary {

class GranaryFile;

class GranaryClient {
 public:
  struct Options {
    std::string socket_path;  // Empty: DefaultClientSocketPath().
    // Whether granaryd fetches the files of a batch it lacks (from their
    // owners or the source) before answering; off: they are read by ranges.
    bool read_through = true;
  };
  // Connects lazily: no request is made here. INVALID_ARGUMENT for a socket
  // path that cannot be a Unix socket's.
  static absl::StatusOr<std::unique_ptr<GranaryClient>> Connect(Options options);
  ~GranaryClient();
  GranaryClient(const GranaryClient&) = delete;
  GranaryClient& operator=(const GranaryClient&) = delete;

  // A batch opened by granaryd, not read yet: for readers that place the
  // bytes themselves (Python's bytes objects, pinned memory).
  struct OpenedFile {
    absl::Status status;  // The file's own: refused, missing, failed fetch.
    uint64_t size = 0;
    uint64_t file_id = 0;
    UniqueFd fd;             // Set when handed over whole (and size > 0).
    bool by_ranges = false;  // Readable, but to be read by ranges over gRPC.
  };
  struct OpenedBatch {
    std::string dataset;
    uint64_t dataset_version = 0;
    uint32_t chunk_size = 0;
    std::vector<OpenedFile> files;  // One per path, in order.
  };
  // Errors of the whole batch: NOT_FOUND for an unknown dataset or version,
  // UNAVAILABLE when granaryd cannot be reached.
  absl::StatusOr<OpenedBatch> OpenMany(std::string_view dataset, std::span<const std::string> paths,
                                       uint64_t version = 0);
  // Reads every file of `batch` whose status is OK whole into outs[i]
  // (files[i].size bytes each); a failed read sets the file's status.
  void ReadOpened(OpenedBatch& batch, std::span<char* const> outs);

  // OpenMany and ReadOpened: each file's bytes or its own error.
  absl::StatusOr<std::vector<absl::StatusOr<std::string>>> ReadMany(
      std::string_view dataset, std::span<const std::string> paths, uint64_t version = 0);

  // One file for ranged reads. NOT_FOUND, PERMISSION_DENIED and
  // INVALID_ARGUMENT (not a regular file) as ReadMany's.
  absl::StatusOr<std::unique_ptr<GranaryFile>> Open(std::string_view dataset, std::string_view path,
                                                    uint64_t version = 0);

  // The datasets granaryd has, and a dataset's manifest (entry i is file id
  // i), over gRPC.
  absl::StatusOr<std::vector<v1::DatasetInfo>> Datasets();
  absl::StatusOr<DatasetSnapshot> Manifest(std::string_view dataset, uint64_t version = 0);

  // Reads [offset, offset + out.size()) of file `file_id` of `version` (in
  // chunks of `chunk_size`) over gRPC.
  absl::Status ReadRange(uint64_t version, uint64_t file_id, uint32_t chunk_size, uint64_t offset,
                         std::span<char> out);

 private:
  GranaryClient(Options options, std::string socket_path);
  // The gRPC client of this process (made again after a fork).
  absl::StatusOr<DatasetClient*> Rpc();

  const Options options_;
  const std::string socket_path_;
  LocalChunkReader local_;
  Mutex mutex_;
  std::unique_ptr<DatasetClient> rpc_ ABSL_GUARDED_BY(mutex_);
  pid_t rpc_owner_ ABSL_GUARDED_BY(mutex_) = 0;
};

// A file of a dataset open for reading: the descriptor of granaryd's
// verified copy when it handed one over, else ranged reads over gRPC.
// Thread-safety: ReadAt may be called concurrently.
class GranaryFile {
 public:
  uint64_t size() const { return size_; }
  // Reads up to out.size() bytes at `offset`: fewer only at the end of the
  // file, 0 past it.
  absl::StatusOr<size_t> ReadAt(uint64_t offset, std::span<char> out);

 private:
  friend class GranaryClient;
  GranaryFile(GranaryClient* client, uint64_t version, uint32_t chunk_size, uint64_t file_id,
              uint64_t size, UniqueFd fd)
      : client_(client),
        version_(version),
        chunk_size_(chunk_size),
        file_id_(file_id),
        size_(size),
        fd_(std::move(fd)) {}

  GranaryClient* const client_;
  const uint64_t version_;
  const uint32_t chunk_size_;
  const uint64_t file_id_;
  const uint64_t size_;
  const UniqueFd fd_;
};

}  // namespace granary

#endif  // GRANARY_CLIENT_GRANARY_CLIENT_H_
