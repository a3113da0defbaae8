#include "fuse_client/read_path/chunk_fetcher.h"

#include "absl/strings/str_cat.h"
#include "common/base/logging.h"
#include "common/dataset/chunk_math.h"
#include "common/jobs/read_origin.h"

namespace granary::fuse {
namespace {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

bool ChunkFetcher::servers_down() const {
  int64_t until = down_until_ns_.load(std::memory_order_relaxed);
  return until != 0 && NowNs() < until;
}

void ChunkFetcher::MarkDown(const absl::Status& cause) {
  int64_t previous = down_until_ns_.exchange(
      NowNs() + std::chrono::duration_cast<std::chrono::nanoseconds>(retry_after_).count());
  if (previous == 0) {
    GRANARY_LOG(WARNING) << "cache servers failed (" << cause
                         << "); reading sources directly until the cache answers again";
  }
}

LocalChunkReader* ChunkFetcher::LocalReads() const { return servers_down() ? nullptr : local_; }

absl::Status ChunkFetcher::FetchLocal(const FileRef& file, uint32_t chunk_index,
                                      uint32_t offset_in_chunk, std::span<char> out) {
  LocalChunkReader* local = LocalReads();
  if (local == nullptr) return absl::UnavailableError("no local read path");
  if (!MayBeLocal(file, chunk_index)) {
    return absl::NotFoundError(absl::StrCat("chunk ", file.KeyOf(chunk_index).ToString(),
                                            " is owned by other members of the group"));
  }
  bool asked = false;
  absl::Status status =
      file.extents.ReadVerified(*local, file.KeyOf(chunk_index), offset_in_chunk, out, &asked);
  if (absl::IsDataLoss(status)) {
    GRANARY_LOG_FIRST_N(WARNING, 20) << status << "; reading it through granaryd";
  }
  if (status.ok() && !asked && uses_ != nullptr) {
    uses_->Record(file.snapshot.manifest.version(), file.file_id, out.size(), 1);
  }
  if (status.ok()) NoteReadOrigin(ReadOrigin::kLocal);
  return status;
}

bool ChunkFetcher::MayBeLocal(const FileRef& file, uint32_t chunk_index) const {
  return servers_->OwnedLocally(file.KeyOf(chunk_index), file.snapshot.info.replicas());
}

bool ChunkFetcher::OwnedLocallyWhole(const DatasetSnapshot& snapshot, uint64_t file_id,
                                     uint64_t size) const {
  const Manifest& manifest = snapshot.manifest;
  for (uint64_t index = 0; index < ChunkCount(size, manifest.chunk_size()); ++index) {
    const ChunkKey key{manifest.version(), file_id, static_cast<uint32_t>(index)};
    if (!servers_->OwnedLocally(key, snapshot.info.replicas())) return false;
  }
  return true;
}

absl::Status ChunkFetcher::PrefetchLocal(const FileRef& file, uint32_t chunk_index) {
  LocalChunkReader* local = LocalReads();
  if (local == nullptr) return absl::UnavailableError("no local read path");
  if (!MayBeLocal(file, chunk_index)) {
    return absl::NotFoundError(absl::StrCat("chunk ", file.KeyOf(chunk_index).ToString(),
                                            " is owned by other members of the group"));
  }
  return file.extents.Prefetch(*local, file.KeyOf(chunk_index));
}

absl::Status ChunkFetcher::Fetch(const FileRef& file, uint32_t chunk_index,
                                 uint32_t offset_in_chunk, std::span<char> out) {
  absl::Status server_status = absl::UnavailableError("cache servers marked down");
  if (!servers_down()) {
    const ChunkKey key = file.KeyOf(chunk_index);
    if (FetchLocal(file, chunk_index, offset_in_chunk, out).ok()) return absl::OkStatus();
    server_status = servers_->ReadChunk(key, offset_in_chunk, out);
    if (server_status.ok()) {
      // A chunk its owner read through from the source was noted as such by
      // the client (DatasetClient): the slowest origin noted counts.
      NoteReadOrigin(MayBeLocal(file, chunk_index) ? ReadOrigin::kLocal : ReadOrigin::kPeer);
      if (down_until_ns_.exchange(0) != 0) {
        GRANARY_LOG(INFO) << "the cache answers again";
      }
      return server_status;
    }
    if (server_status.code() == absl::StatusCode::kFailedPrecondition) {
      // The reader gets ESTALE; the log says which file and why.
      GRANARY_LOG_FIRST_N(WARNING, 100)
          << "read of " << file.source.Path() << " failed: " << server_status;
      return server_status;
    }
    if (server_status.code() == absl::StatusCode::kUnavailable ||
        server_status.code() == absl::StatusCode::kDeadlineExceeded) {
      MarkDown(server_status);
    } else {
      GRANARY_LOG_FIRST_N(WARNING, 20)
          << "cache servers failed chunk " << key.ToString() << " of " << file.source.Path() << " ("
          << server_status << "); reading the source";
    }
  }
  uint64_t offset = uint64_t{chunk_index} * file.snapshot.manifest.chunk_size() + offset_in_chunk;
  absl::Status source_status = file.source.ReadExactly(*sources_, offset, out);
  if (source_status.ok()) {
    NoteReadOrigin(ReadOrigin::kSource);
    return source_status;
  }
  GRANARY_LOG(ERROR) << "read of " << file.source.Path() << " [" << offset << ", +" << out.size()
                     << ") failed: server: " << server_status << "; source: " << source_status;
  if (source_status.code() == absl::StatusCode::kFailedPrecondition) return source_status;
  return absl::UnavailableError(
      absl::StrCat("server: ", server_status.ToString(), "; source: ", source_status.ToString()));
}

}  // namespace granary::fuse
