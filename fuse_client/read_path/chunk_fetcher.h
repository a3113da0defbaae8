// ChunkFetcher is granary-fuse's read path below the chunk cache: it reads a
// range of one chunk from the cache servers, each chunk from its owner in this
// node's cache group (ClusterReader), and when no server can serve it, from
// the dataset's source directly (SourceFile, POSIX and S3 alike), so a training job keeps reading
// through cache nodes' failures.
//
// A chunk the local granaryd holds is read out of its data file directly
// (the local read path, common/net/local_read_socket.h), without its bytes
// crossing gRPC, and granaryd is asked where it lies once per open file
// (LocalExtents); reads served from what was asked before are reported to it
// in batches (UseReporter). Any failure there (a miss, above all) falls back
// to the path below.
//
// Policy:
//  - FAILED_PRECONDITION from a server (the source changed since the
//    snapshot, or is gone) is final: the read fails, FUSE answers ESTALE, and
//    a WARNING line names the file and the server's reason.
//  - Any other server error falls back to the source. UNAVAILABLE (no owner
//    of the chunk answered) and DEADLINE_EXCEEDED also mark the servers down
//    for `retry_after`, during which reads go to the source without trying
//    them, so a hung cache costs one deadline, not one per read.
//  - If the source fails too, the read fails (EIO; ESTALE if the source file
//    changed) and one ERROR line names the file and both causes.
//
// Thread-safety: every method may be called concurrently.
#ifndef GRANARY_FUSE_CLIENT_READ_PATH_CHUNK_FETCHER_H_
#define GRANARY_FUSE_CLIENT_READ_PATH_CHUNK_FETCHER_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "client/cluster_reader.h"
#include "client/dataset_client.h"
#include "common/net/local_read_socket.h"
#include "fuse_client/read_path/local_extents.h"
#include "fuse_client/read_path/source_file.h"
#include "fuse_client/read_path/use_reporter.h"

namespace granary::fuse {

// One open file of a mounted dataset version, as the read path sees it.
struct FileRef {
  ChunkKey KeyOf(uint32_t chunk_index) const {
    return {snapshot.manifest.version(), file_id, chunk_index};
  }

  const DatasetSnapshot& snapshot;
  uint64_t file_id;
  SourceFile& source;
  LocalExtents& extents;
};

class ChunkFetcher {
 public:
  // `servers`, `local` (null: no local read path, as when the local server
  // is reached over TCP), `uses` (where local reads that granaryd did not
  // see are reported; null with no local read path) and `sources` (where
  // datasets' sources are opened for reads the servers cannot serve) must
  // outlive the fetcher.
  ChunkFetcher(ClusterReader* servers, LocalChunkReader* local, UseReporter* uses,
               OpenedSources* sources, std::chrono::milliseconds retry_after)
      : servers_(servers),
        local_(local),
        uses_(uses),
        sources_(sources),
        retry_after_(retry_after) {}

  // Reads `out.size()` bytes at `offset_in_chunk` of chunk `chunk_index` of
  // `file`; the range must lie inside the chunk.
  absl::Status Fetch(const FileRef& file, uint32_t chunk_index, uint32_t offset_in_chunk,
                     std::span<char> out);
  // The same from the local granaryd's store only: NOT_FOUND when it does
  // not hold the chunk (or is not one of its owners), UNAVAILABLE when there
  // is no local read path or the servers are marked down; then Fetch() is
  // the way.
  absl::Status FetchLocal(const FileRef& file, uint32_t chunk_index, uint32_t offset_in_chunk,
                          std::span<char> out);
  // Whether the local granaryd may hold chunk `chunk_index` of `file`: it
  // is one of the chunk's owners in its group (ClusterReader::OwnedLocally).
  bool MayBeLocal(const FileRef& file, uint32_t chunk_index) const;
  // The same for every chunk of file `file_id` of `snapshot`, `size` bytes.
  bool OwnedLocallyWhole(const DatasetSnapshot& snapshot, uint64_t file_id, uint64_t size) const;

  // Starts reading chunk `chunk_index` of `file` from the local granaryd's
  // disk into the page cache; errors as FetchLocal().
  absl::Status PrefetchLocal(const FileRef& file, uint32_t chunk_index);

  // True while reads skip the servers.
  bool servers_down() const;

 private:
  void MarkDown(const absl::Status& cause);
  // The local read path, or null when reads may not use it now.
  LocalChunkReader* LocalReads() const;

  ClusterReader* const servers_;
  LocalChunkReader* const local_;
  UseReporter* const uses_;
  OpenedSources* const sources_;
  const std::chrono::milliseconds retry_after_;
  std::atomic<int64_t> down_until_ns_{0};  // steady_clock; 0: up.
};

}  // namespace granary::fuse

#endif  // GRANARY_FUSE_CLIENT_READ_PATH_CHUNK_FETCHER_H_
