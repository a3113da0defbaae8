// Chunk holds bytes [begin(), end()) of one chunk of a dataset file, as
// granary-fuse's read path passes them around: either in memory it owns
// (fetched over gRPC or from the source), or mapped in place from the local
// granaryd's store (common/mapped_chunk.h), whose bytes are verified each time
// they are read.
//
// Thread-safety: a filled chunk is immutable; Bytes() may be called
// concurrently.
#ifndef GRANARY_FUSE_CLIENT_CHUNK_H_
#define GRANARY_FUSE_CLIENT_CHUNK_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>

#include "absl/status/statusor.h"
#include "common/mapped_chunk.h"

namespace granary::fuse {

class Chunk {
 public:
  // Memory for bytes [begin, begin + length), left uninitialised: the fetch
  // fills it through memory().
  Chunk(uint64_t begin, size_t length)
      : begin_(begin), end_(begin + length), owned_(new char[length]) {}
  explicit Chunk(MappedChunk mapped)
      : begin_(mapped.begin()), end_(mapped.end()), mapped_(std::move(mapped)) {}

  uint64_t begin() const { return begin_; }
  uint64_t end() const { return end_; }
  size_t size() const { return end_ - begin_; }

  // The owned memory, to fill; empty for a mapped chunk.
  std::span<char> memory() { return {owned_.get(), owned_ != nullptr ? size() : 0}; }

  // Bytes [offset, offset + length) of the chunk, which must lie in
  // [begin(), end()). Mapped bytes are verified now: DATA_LOSS if they no
  // longer match their checksums.
  absl::StatusOr<std::span<const char>> Bytes(uint64_t offset, uint64_t length) const {
    if (mapped_) return mapped_->Verified(offset, length);
    return std::span<const char>(owned_.get() + (offset - begin_), length);
  }

 private:
  uint64_t begin_;
  uint64_t end_;
  std::unique_ptr<char[]> owned_;
  std::optional<MappedChunk> mapped_;
};

}  // namespace granary::fuse

#endif  // GRANARY_FUSE_CLIENT_CHUNK_H_
