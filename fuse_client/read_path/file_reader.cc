#include "fuse_client/read_path/file_reader.h"

#include <algorithm>
#include <cstring>

#include "common/dataset/chunk_math.h"

namespace granary::fuse {
namespace {

// How far behind the front of a sequential stream a read still belongs to
// it: the kernel's readahead window (granary-fuse's --read-ahead-kb) and more.
constexpr uint64_t kOutOfOrderBytes = 16 << 20;

}  // namespace

FileReader::Stream FileReader::Record(uint64_t offset, uint64_t end) {
  const uint64_t chunk_size = file_->chunk_size();
  const uint64_t chunk = offset / chunk_size;
  MutexLock lock(&mutex_);
  const uint64_t expected_chunk = next_offset_ / chunk_size;
  const bool near = chunk + 1 >= expected_chunk && chunk <= expected_chunk + 1;
  // The kernel's readahead requests arrive out of order, some a little behind
  // the front of the stream.
  const bool just_behind = offset < next_offset_ && offset + kOutOfOrderBytes >= next_offset_;
  near_run_ = near ? near_run_ + 1 : 0;
  const bool sequential = offset == 0 || offset == next_offset_ || near_run_ >= 2 ||
                          ((near || just_behind) && streaming_);
  // Readahead pays once the stream has shown itself: a read that starts
  // where the one before it ended, or a third sequential read in a row. A
  // read near a lone first one (a header, then a record in the first
  // chunks) does not.
  const bool continued =
      sequential && streaming_ && (offset == next_offset_ || sequential_run_ >= 2);
  next_offset_ = sequential ? std::max(next_offset_, end) : end;
  sequential_run_ = sequential ? sequential_run_ + 1 : 0;
  streaming_ = sequential;
  return Stream{.sequential = sequential, .continued = continued};
}

absl::StatusOr<FileReader::Reply> FileReader::Read(uint64_t offset, size_t size) {
  const uint64_t file_size = file_->entry.size;
  const uint32_t chunk_size = file_->chunk_size();
  std::vector<ChunkSlice> slices = SliceRange(file_size, chunk_size, offset, size);
  if (slices.empty()) return Reply{};
  const uint64_t end = offset + slices.back().offset_in_range + slices.back().length;
  const Stream stream = Record(offset, end);
  const bool sequential = stream.sequential;
  if (stream.continued) {  // Before this read blocks, so the fetches overlap.
    const uint64_t last_chunk = ChunkCount(file_size, chunk_size);
    const uint64_t window = std::max<uint64_t>(1, context_.readahead_bytes / chunk_size);
    for (uint64_t next = slices.back().chunk_index + 1;
         next < last_chunk && next <= slices.back().chunk_index + window; ++next) {
      context_.readahead->Schedule(file_, static_cast<uint32_t>(next), /*into_page_cache=*/false);
    }
  }

  std::shared_ptr<ChunkBytes> assembled;
  if (slices.size() > 1) assembled = std::make_shared<ChunkBytes>(end - offset);
  auto output_of = [&](const ChunkSlice& slice) {
    if (assembled == nullptr) assembled = std::make_shared<ChunkBytes>(slice.length);
    return assembled->span().subspan(slice.offset_in_range, slice.length);
  };
  for (const ChunkSlice& slice : slices) {
    std::shared_ptr<const ChunkBytes> chunk =
        context_.cache->GetIfCached(file_->KeyOf(slice.chunk_index));
    // Straight from the local store when it holds the chunk: each byte is
    // read and copied once, and no whole chunk waits in memory.
    const bool local = chunk == nullptr && context_.fetcher
                                               ->FetchLocal(file_->ref(), slice.chunk_index,
                                                            slice.offset_in_chunk, output_of(slice))
                                               .ok();
    if (local && sequential) continue;
    if (local) {
      // A random read of a held chunk: its next reads are a page cache hit
      // once the chunk's copy lands there.
      context_.readahead->Schedule(file_, slice.chunk_index, /*into_page_cache=*/true);
      continue;
    }
    if (chunk == nullptr && stream.continued) {
      if (slices.size() == 1) assembled.reset();  // The reply points into the chunk instead.
      auto loaded =
          file_->LoadChunk(slice.chunk_index, *context_.cache, *context_.fetcher, nullptr);
      if (!loaded.ok()) return loaded.status();
      chunk = *std::move(loaded);
    }
    if (chunk != nullptr && !sequential) {
      // Its next reads are a page cache hit once this copy lands.
      context_.page_store->Store(file_->inode, file_->OffsetOf(slice.chunk_index), chunk);
    }
    if (chunk != nullptr) {
      std::span<const char> bytes = chunk->span().subspan(slice.offset_in_chunk, slice.length);
      if (assembled == nullptr) return Reply{std::move(chunk), bytes};
      std::memcpy(assembled->bytes.get() + slice.offset_in_range, bytes.data(), bytes.size());
      continue;
    }
    // A random read, or the first of a stream, of a chunk not held: only its
    // own bytes, so that granaryd fetches only the blocks covering them.
    absl::Status status = context_.fetcher->Fetch(file_->ref(), slice.chunk_index,
                                                  slice.offset_in_chunk, output_of(slice));
    if (!status.ok()) return status;
  }
  return Reply{assembled, assembled->span()};
}

}  // namespace granary::fuse
