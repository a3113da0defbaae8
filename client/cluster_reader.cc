#include "client/cluster_reader.h"

#include <algorithm>
#include <utility>

#include "client/chunk_reads.h"

namespace granary {

ClusterReader::ClusterReader(const DatasetClient* local, Options options)
    : local_(local),
      options_(std::move(options)),
      watcher_(local, options_.watch, [this](const MemberView& view) { Adopt(view); }) {}

void ClusterReader::Adopt(const MemberView& view) {
  MutexLock lock(&mutex_);
  bool same_binding =
      router_ != nullptr && view.self_id == view_.self_id && view.group == view_.group;
  view_ = view;
  if (same_binding) {
    router_->UpdateMembers(view.members);
    return;
  }
  ChunkRouter::Options router_options;
  router_options.group = view.group;
  router_options.local_node_id = view.self_id;
  router_options.local_address = local_->address();
  router_options.client = options_.client;
  router_ = std::make_shared<ChunkRouter>(std::move(router_options), view.members);
}

std::shared_ptr<ChunkRouter> ClusterReader::router() const {
  MutexLock lock(&mutex_);
  return router_;
}

MemberView ClusterReader::view() const {
  MutexLock lock(&mutex_);
  return view_;
}

bool ClusterReader::OwnedLocally(const ChunkKey& key, uint32_t copies) const {
  MutexLock lock(&mutex_);
  if (view_.members == nullptr) return true;
  for (const Member* owner :
       view_.members->Owners(key, view_.group, std::max<uint32_t>(copies, 1))) {
    if (owner->id == view_.self_id) return true;
  }
  return false;
}

absl::Status ClusterReader::ReadChunk(const ChunkKey& key, uint32_t offset_in_chunk,
                                      std::span<char> out) {
  absl::Status read = router()->ReadFromOwners(key, offset_in_chunk, out);
  if (read.code() == absl::StatusCode::kUnavailable) watcher_.RefreshSoon();
  return read;
}

absl::StatusOr<DatasetSnapshot> ClusterReader::ManifestFromPeers(std::string_view name,
                                                                 uint64_t version) {
  return router()->ManifestFromPeers(name, version);
}

absl::StatusOr<size_t> ClusterReader::ReadFile(const DatasetSnapshot& snapshot, uint64_t file_id,
                                               uint64_t offset, std::span<char> out) {
  return ReadFileThroughChunks(
      snapshot.manifest, file_id, offset, out,
      [this](const ChunkKey& key, uint32_t offset_in_chunk, std::span<char> piece) {
        return ReadChunk(key, offset_in_chunk, piece);
      });
}

}  // namespace granary
