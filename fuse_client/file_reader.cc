#include "fuse_client/file_reader.h"

#include <algorithm>
#include <cstring>

#include "common/chunk_math.h"
#include "common/logging.h"
#include "common/status.h"

namespace granary::fuse {

bool FileReader::Record(uint64_t offset, uint64_t end) {
  const uint64_t chunk_size = file_->chunk_size();
  const uint64_t chunk = offset / chunk_size;
  std::lock_guard lock(mutex_);
  const uint64_t expected_chunk = next_offset_ / chunk_size;
  const bool near = chunk + 1 >= expected_chunk && chunk <= expected_chunk + 1;
  near_run_ = near ? near_run_ + 1 : 0;
  const bool sequential = offset == 0 || offset == next_offset_ || near_run_ >= 2;
  next_offset_ = sequential ? std::max(next_offset_, end) : end;
  return sequential;
}

absl::StatusOr<FileReader::Reply> FileReader::Read(uint64_t offset, size_t size) {
  const uint64_t file_size = file_->entry.size;
  const uint32_t chunk_size = file_->chunk_size();
  std::vector<ChunkSlice> slices = SliceRange(file_size, chunk_size, offset, size);
  if (slices.empty()) return Reply{};
  const uint64_t end = offset + slices.back().offset_in_range + slices.back().length;
  const bool sequential = Record(offset, end);
  if (sequential) {  // Before this read blocks, so the fetches overlap.
    const uint64_t last_chunk = ChunkCount(file_size, chunk_size);
    const uint64_t window = std::max<uint64_t>(1, context_.readahead_bytes / chunk_size);
    for (uint64_t next = slices.back().chunk_index + 1;
         next < last_chunk && next <= slices.back().chunk_index + window; ++next) {
      context_.readahead->Schedule(file_, static_cast<uint32_t>(next), /*into_page_cache=*/false);
    }
  }

  std::shared_ptr<Chunk> assembled;
  if (slices.size() > 1) assembled = std::make_shared<Chunk>(0, end - offset);
  for (const ChunkSlice& slice : slices) {
    std::shared_ptr<const Chunk> chunk =
        context_.cache->GetIfCached(file_->KeyOf(slice.chunk_index));
    if (chunk == nullptr && sequential) {
      GRANARY_ASSIGN_OR_RETURN(
          chunk, file_->LoadChunk(slice.chunk_index, *context_.cache, *context_.fetcher, nullptr));
    }
    if (chunk != nullptr && !sequential) {
      // Its next reads are a page cache hit once this copy lands.
      context_.page_store->Store(file_->inode, file_->OffsetOf(slice.chunk_index), chunk);
    }
    if (chunk == nullptr) {
      // A random read: its whole chunk is fetched in the background (for the
      // reads near it that usually follow), while it reads only its bytes.
      context_.readahead->Schedule(file_, slice.chunk_index, /*into_page_cache=*/true);
      GRANARY_ASSIGN_OR_RETURN(Chunk part,
                               context_.fetcher->Fetch(file_->ref(), slice.chunk_index,
                                                       slice.offset_in_chunk, slice.length));
      chunk = std::make_shared<const Chunk>(std::move(part));
    }
    GRANARY_ASSIGN_OR_RETURN(std::span<const char> bytes, VerifiedBytes(slice, chunk));
    if (assembled == nullptr) return Reply{std::move(chunk), bytes};
    std::memcpy(assembled->memory().data() + slice.offset_in_range, bytes.data(), bytes.size());
  }
  return Reply{assembled, assembled->memory()};
}

absl::StatusOr<std::span<const char>> FileReader::VerifiedBytes(
    const ChunkSlice& slice, std::shared_ptr<const Chunk>& chunk) {
  absl::StatusOr<std::span<const char>> bytes = chunk->Bytes(slice.offset_in_chunk, slice.length);
  if (!absl::IsDataLoss(bytes.status())) return bytes;
  // The local granaryd's copy was damaged since it was mapped: a miss, which
  // granaryd reads through again.
  GRANARY_LOG_FIRST_N(WARNING, 20) << bytes.status() << "; reading it through granaryd";
  context_.cache->Drop(file_->KeyOf(slice.chunk_index));
  GRANARY_ASSIGN_OR_RETURN(Chunk fetched,
                           context_.fetcher->FetchUnmapped(file_->ref(), slice.chunk_index,
                                                           slice.offset_in_chunk, slice.length));
  chunk = std::make_shared<const Chunk>(std::move(fetched));
  return chunk->Bytes(slice.offset_in_chunk, slice.length);
}

}  // namespace granary::fuse
