#include "common/mapped_chunk.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/block_checksums.h"
#include "common/hash.h"
#include "common/status.h"

namespace granary {
namespace {

struct Range {
  uint64_t begin;
  uint64_t end;
};

// The bytes whose checksums vouch for [offset, offset + length) of the chunk:
// whole blocks, or the whole chunk when only its checksum is known.
Range Covering(const v1::ChunkLocation& location, uint64_t offset, uint64_t length) {
  if (!HasBlockChecksums(location)) return {0, location.length()};
  const uint64_t block_bytes = location.checksum_block_bytes();
  return {offset / block_bytes * block_bytes,
          std::min<uint64_t>(location.length(),
                             (offset + length + block_bytes - 1) / block_bytes * block_bytes)};
}

}  // namespace

absl::StatusOr<MappedChunk> MappedChunk::Map(int segment_fd, const v1::ChunkLocation& location,
                                             const ChunkKey& key, uint64_t offset,
                                             uint64_t length) {
  if (offset > location.length() || length > location.length() - offset) {
    return absl::OutOfRangeError(absl::StrCat("range [", offset, ", +", length,
                                              ") is past the end of chunk ", key.ToString(), " (",
                                              location.length(), " bytes)"));
  }
  const Range covering = Covering(location, offset, length);
  struct stat st;
  if (::fstat(segment_fd, &st) != 0) {
    return ErrnoStatus(errno, absl::StrCat("stat of the segment of chunk ", key.ToString()));
  }
  // Touching a mapping past the end of its file faults the whole process.
  if (static_cast<uint64_t>(st.st_size) < location.offset() + covering.end) {
    return absl::DataLossError(
        absl::StrCat("the segment of chunk ", key.ToString(), " ends before the chunk does"));
  }
  static const uint64_t page_bytes = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t first = location.offset() + covering.begin;
  const uint64_t mapped_from = first / page_bytes * page_bytes;
  const size_t mapping_bytes = location.offset() + covering.end - mapped_from;
  if (mapping_bytes == 0) {
    return MappedChunk(nullptr, 0, nullptr, covering.begin, covering.end, location, key);
  }
  void* mapping = ::mmap(nullptr, mapping_bytes, PROT_READ, MAP_SHARED | MAP_POPULATE, segment_fd,
                         static_cast<off_t>(mapped_from));
  if (mapping == MAP_FAILED) {
    return ErrnoStatus(errno, absl::StrCat("mapping chunk ", key.ToString()));
  }
  return MappedChunk(mapping, mapping_bytes,
                     static_cast<const char*>(mapping) + (first - mapped_from), covering.begin,
                     covering.end, location, key);
}

MappedChunk::MappedChunk(MappedChunk&& other) noexcept
    : mapping_(std::exchange(other.mapping_, nullptr)),
      mapping_bytes_(other.mapping_bytes_),
      data_(other.data_),
      begin_(other.begin_),
      end_(other.end_),
      location_(std::move(other.location_)),
      key_(other.key_) {}

MappedChunk::~MappedChunk() {
  if (mapping_ != nullptr) ::munmap(mapping_, mapping_bytes_);
}

absl::StatusOr<std::span<const char>> MappedChunk::Verified(uint64_t offset,
                                                            uint64_t length) const {
  const Range covering = Covering(location_, offset, length);
  if (covering.begin < begin_ || covering.end > end_) {
    return absl::OutOfRangeError(absl::StrCat("range [", offset, ", +", length, ") of chunk ",
                                              key_.ToString(), " is outside its mapped bytes [",
                                              begin_, ", ", end_, ")"));
  }
  const char* covered = data_ + (covering.begin - begin_);
  const uint64_t covered_bytes = covering.end - covering.begin;
  const std::optional<uint64_t> mismatch =
      HasBlockChecksums(location_)
          ? MismatchedBlock(location_, covering.begin / location_.checksum_block_bytes(), covered,
                            covered_bytes)
      : Xxh3(covered, covered_bytes) != location_.xxh3() ? std::optional<uint64_t>(0)
                                                         : std::nullopt;
  if (mismatch) {
    return absl::DataLossError(absl::StrCat("chunk ", key_.ToString(),
                                            " does not match its checksum at block ", *mismatch));
  }
  return std::span<const char>(data_ + (offset - begin_), length);
}

}  // namespace granary
