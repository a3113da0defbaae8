// ClusterReader is how a reader of datasets (granary-fuse, `granary cat`)
// reads chunks: each chunk from its owner in the reader's own cache group,
// through a ChunkRouter (owner first, then the next owner), with the member
// list a MemberWatcher keeps current from the reader's local granaryd. The
// local node is reached over the address the reader uses for it (its Unix
// socket), every other member over TCP.
//
// A read that no owner could serve asks the watcher for a fresh member list
// (rate-limited), since the likeliest cause is a member that left. The error
// is still returned: what to do then (read the source, fail) is the caller's
// policy.
//
// The router is bound to the reader's group and the local node's id, which
// come from the local server's answer; when they change (typically the first
// answer after the server could not list its members), a new router replaces
// the old one, and reads in flight finish on the old one. Member list changes
// alone go to ChunkRouter::UpdateMembers. No read ever waits for a refresh.
//
// Thread-safety: every method may be called concurrently.
#ifndef GRANARY_CLIENT_CLUSTER_READER_H_
#define GRANARY_CLIENT_CLUSTER_READER_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/chunk_router.h"
#include "client/dataset_client.h"
#include "client/member_watcher.h"
#include "common/base/mutex.h"
#include "common/dataset/chunk_key.h"

namespace granary {

class ClusterReader {
 public:
  struct Options {
    DatasetClient::Options client;  // For every member: deadlines and the cluster token.
    MemberWatcher::Options watch;
  };

  // `local` is the reader's own granaryd; it must outlive the reader. Asks it
  // for the member list before returning.
  ClusterReader(const DatasetClient* local, Options options);

  // Reads `out.size()` bytes at `offset_in_chunk` of chunk `key` from its
  // owners; errors as ChunkRouter::ReadFromOwners.
  absl::Status ReadChunk(const ChunkKey& key, uint32_t offset_in_chunk, std::span<char> out);

  // Reads up to `out.size()` bytes of file `file_id` of `snapshot` at
  // `offset`, chunk by chunk, and returns how many were read: fewer only at the
  // end of the file.
  absl::StatusOr<size_t> ReadFile(const DatasetSnapshot& snapshot, uint64_t file_id,
                                  uint64_t offset, std::span<char> out);

  // The manifest of `version` of dataset `name` from another member
  // (ChunkRouter::ManifestFromPeers), for when the local granaryd cannot
  // answer: a mount keeps opening datasets while its own server is down.
  absl::StatusOr<DatasetSnapshot> ManifestFromPeers(std::string_view name, uint64_t version);

  // The view reads are routed by now.
  MemberView view() const;

  // Whether the local node is one of the `copies` owners of `key` in its
  // group (always, before any member list is known): where it is not, the
  // local store is not worth asking for the chunk.
  bool OwnedLocally(const ChunkKey& key, uint32_t copies) const;

 private:
  // The watcher's listener.
  void Adopt(const MemberView& view);
  std::shared_ptr<ChunkRouter> router() const;

  const DatasetClient* const local_;
  const Options options_;
  mutable Mutex mutex_;
  MemberView view_ ABSL_GUARDED_BY(mutex_);
  std::shared_ptr<ChunkRouter> router_ ABSL_GUARDED_BY(mutex_);  // Bound to view_'s self and group.
  MemberWatcher watcher_;  // Last: its first view arrives during construction.
};

}  // namespace granary

#endif  // GRANARY_CLIENT_CLUSTER_READER_H_
