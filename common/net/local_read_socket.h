// The local read path: how a reader on granaryd's own host (granary-fuse)
// reads cached chunks out of the cache's data files itself, instead of
// receiving every byte over gRPC. granaryd answers a LocalReadRequest on its
// local read socket (SOCK_SEQPACKET, the gRPC socket's path + ".local", with
// the same owner, group and mode) with the chunk's location and a read-only
// descriptor of its data file (SCM_RIGHTS); the reader preads the chunk and
// verifies each block against the location's XXH3s before using a byte of
// it. A whole-file request gets the descriptor of a data file that is its
// source file byte for byte, verified, for the kernel to serve (FUSE
// passthrough), and those of the files it asked for ahead of their opens
// that granaryd holds so; a use report tells granaryd what the reader served
// itself.
//
// A chunk's descriptor may be kept for later reads of the chunk: if the data
// file is reclaimed meanwhile, the descriptor reads the old, unlinked file,
// which the checksums still vouch for (and which keeps its disk blocks until
// closed: use reports name the files withdrawn, for their descriptors to be
// closed). Anything that fails here (a miss, no server, a mismatch) is for the
// caller to read through gRPC instead, which reads misses through and drops
// chunks that do not verify.
//
// Thread-safety: the free functions are reentrant; LocalChunkReader's methods
// may be called concurrently (each call uses a connection of its own).
#ifndef GRANARY_COMMON_NET_LOCAL_READ_SOCKET_H_
#define GRANARY_COMMON_NET_LOCAL_READ_SOCKET_H_

#include <sys/types.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/base/mutex.h"
#include "common/base/unique_fd.h"
#include "common/dataset/chunk_key.h"
#include "google/protobuf/message_lite.h"
#include "proto/granary.pb.h"

namespace granary {

// Where granaryd serving the gRPC socket `grpc_socket_path` answers local reads.
std::string LocalReadSocketPath(std::string_view grpc_socket_path);

// How long the reader waits for granaryd to take a request or answer it
// before reading through gRPC instead. Connecting never waits.
inline constexpr std::chrono::milliseconds kLocalReadTimeout{2000};

// Largest message either side sends (a location with a checksum per block).
inline constexpr size_t kMaxLocalReadMessageBytes = 64 << 10;

// Files a whole-file request may ask for ahead of their opens.
inline constexpr size_t kMaxAheadFiles = 32;

// Files one batch request may name (v1::BatchRequest): each may come with a
// descriptor, and one datagram carries at most 253 (SCM_MAX_FD).
inline constexpr size_t kMaxBatchFiles = 128;

// Descriptors one answer carries at most.
inline constexpr size_t kMaxPassedDescriptors = std::max(1 + kMaxAheadFiles, kMaxBatchFiles);

// Sends `message` as one datagram on `socket`, with `passed_fds` attached
// (at most kMaxPassedDescriptors).
absl::Status SendLocalReadMessage(int socket, const google::protobuf::MessageLite& message,
                                  std::span<const int> passed_fds);
// Receives one datagram into `message`, and into `*passed` the descriptors
// attached to it. UNAVAILABLE when the peer has closed the connection.
absl::Status ReceiveLocalReadMessage(int socket, google::protobuf::MessageLite* message,
                                     std::vector<UniqueFd>* passed);

// How a whole-file request treats a file granaryd does not hold whole.
enum class WholeFileFetch {
  kHeldOnly,     // NOT_FOUND.
  kReadThrough,  // Fetches what it lacks and stores it, then answers.
  // Fetches what it lacks and answers with an in-memory copy of the file
  // (a sealed memfd), storing behind the answer; the holder keeps it no
  // longer than the file is open.
  kReadThroughInMemory,
};

// A file handed over whole for the kernel to serve: the cache's data file,
// verified, or an in-memory copy (kReadThroughInMemory).
struct LocalWholeFile {
  UniqueFd fd;
  int64_t verified_ctime_ns = 0;  // The data file's ctime when verified; 0 in memory.
  bool in_memory = false;
};

// A file of the same dataset version asked for ahead of its open, with a
// whole-file request: its id and its size in the manifest.
struct AheadFile {
  uint64_t file_id = 0;
  uint64_t size = 0;
};
// One of those that granaryd holds whole and verified: its data file.
struct AheadWholeFile {
  uint64_t file_id = 0;
  LocalWholeFile file;
};

// The reader's side: connections to one granaryd's local read socket, made
// when needed and kept for the next read.
class LocalChunkReader {
 public:
  // Each request and each answer waits at most `timeout`.
  explicit LocalChunkReader(std::string socket_path,
                            std::chrono::milliseconds timeout = kLocalReadTimeout)
      : socket_path_(std::move(socket_path)), timeout_(timeout) {}
  ~LocalChunkReader();
  LocalChunkReader(const LocalChunkReader&) = delete;
  LocalChunkReader& operator=(const LocalChunkReader&) = delete;

  // Where the local granaryd holds chunk `key`: a read-only descriptor of its
  // data file and its location, counted as a hit serving `read_bytes` (0 for
  // a prefetch). NOT_FOUND when it does not hold the chunk, UNAVAILABLE when
  // it cannot be reached.
  struct Extent {
    UniqueFd fd;
    v1::ChunkLocation location;
  };
  absl::StatusOr<Extent> Locate(const ChunkKey& key, uint64_t read_bytes);

  // The data file of the file `key` names (its version and file id) when the
  // local granaryd holds it whole, `size` bytes in chunks of `chunk_size`,
  // every chunk verified: for the kernel to serve. Otherwise as `fetch` says.
  // With the answer, `*ahead_held` (unless null) gets the files of `ahead`
  // (at most kMaxAheadFiles, of the same version) that granaryd holds whole
  // and verified: one request for the opens to come.
  using WholeFile = LocalWholeFile;
  absl::StatusOr<WholeFile> OpenWholeFile(const ChunkKey& key, uint64_t size, uint32_t chunk_size,
                                          WholeFileFetch fetch,
                                          std::span<const AheadFile> ahead = {},
                                          std::vector<AheadWholeFile>* ahead_held = nullptr);

  // Reports reads this reader served itself; the answer lists the files
  // withdrawn since the report before.
  absl::StatusOr<v1::WithdrawnFiles> ReportUses(const v1::UseReport& report);

  // Reads `out.size()` bytes at `offset_in_chunk` of chunk `key` out of the
  // local granaryd's store, verified. NOT_FOUND when it does not hold the
  // chunk, UNAVAILABLE when it cannot be reached, DATA_LOSS when the bytes do
  // not match their checksums, OUT_OF_RANGE past the chunk's end.
  absl::Status Read(const ChunkKey& key, uint32_t offset_in_chunk, std::span<char> out);

  // The answer to a batch of whole files (v1::BatchRequest, at most
  // kMaxBatchFiles paths) and the descriptors attached to it, one for each
  // file answered with code 0 and a size other than 0, in order. Errors of
  // the whole batch as the answer's code; INTERNAL when the descriptors do
  // not match the files.
  struct Batch {
    v1::BatchAnswer answer;
    std::vector<UniqueFd> fds;
  };
  absl::StatusOr<Batch> ReadBatch(const v1::BatchRequest& request);

 private:
  struct Answer {
    v1::LocalReadResponse response;
    std::vector<UniqueFd> fds;
  };
  // An idle connection (`*kept` set), or a new one.
  absl::StatusOr<int> TakeConnection(bool* kept);
  void KeepConnection(int socket);
  void DropIdleConnections();
  // Sends `request` until an answer arrives (a kept connection cut by a
  // granaryd restart is retried on a new one); the answer's code as the
  // status.
  absl::StatusOr<Answer> Exchange(const v1::LocalReadRequest& request);

  const std::string socket_path_;
  const std::chrono::milliseconds timeout_;
  Mutex mutex_;
  std::vector<int> idle_ ABSL_GUARDED_BY(mutex_);
  // The process that made the idle connections: a child forked since
  // (a DataLoader worker) makes its own instead of sharing its parent's.
  pid_t idle_owner_ ABSL_GUARDED_BY(mutex_) = 0;
};

// Reads bytes [offset, offset + out.size()) of the chunk at `location` in
// the data file open as `data_fd` and verifies them: the covering blocks
// against location.block_xxh3, or the whole chunk against location.xxh3 when
// the location predates block checksums. DATA_LOSS on a mismatch or a short
// file, naming the chunk.
absl::Status ReadVerifiedRange(int data_fd, const v1::ChunkLocation& location, const ChunkKey& key,
                               uint64_t offset, std::span<char> out);

}  // namespace granary

#endif  // GRANARY_COMMON_NET_LOCAL_READ_SOCKET_H_
