// ChunkStore::Open: checks the options, prepares the cache directories and
// opens the data-file store (data_file_chunk_store.h) over them.
#include "cache_server/store/chunk_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <limits>
#include <set>

#include "absl/strings/str_cat.h"
#include "cache_server/store/data_file_chunk_store.h"
#include "common/base/file_util.h"
#include "common/base/size.h"
#include "common/base/status.h"
#include "common/dataset/chunk_math.h"

namespace granary::store {
namespace {

// Creates `directory` and its data file folders if needed, private to
// granaryd, and checks that files can be created in it.
absl::Status PrepareDirectory(const std::string& directory) {
  GRANARY_RETURN_IF_ERROR(CreatePrivateDirectory(directory, "cache directory"));
  const std::string probe = absl::StrCat(directory, "/.granary-write-probe");
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    return ErrnoStatus(errno, absl::StrCat("cache directory ", directory, " is not writable"));
  }
  ::close(fd);
  ::unlink(probe.c_str());
  for (int i = 0; i < DataFile::kSubdirectories; ++i) {
    GRANARY_RETURN_IF_ERROR(CreatePrivateDirectory(
        absl::StrCat(directory, "/", DataFile::SubdirectoryName(i)), "cache directory"));
  }
  return absl::OkStatus();
}

absl::Status ValidateOptions(const StoreOptions& options) {
  if (options.directories.empty()) {
    return absl::InvalidArgumentError("chunk store: no cache directories given");
  }
  if (std::set<std::string>(options.directories.begin(), options.directories.end()).size() !=
      options.directories.size()) {
    return absl::InvalidArgumentError("chunk store: a cache directory is listed twice");
  }
  if (options.index_path.empty()) {
    return absl::InvalidArgumentError("chunk store: no index path given");
  }
  if (options.max_chunk_bytes == 0 ||
      options.max_chunk_bytes > std::numeric_limits<uint32_t>::max()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "chunk store: maximum chunk size ", options.max_chunk_bytes, " is not in 1 B - 4 GiB"));
  }
  if (options.capacity_bytes < RoundUpToBlock(options.max_chunk_bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "chunk store: capacity ", FormatSize(options.capacity_bytes),
        " is smaller than one chunk of the maximum size, ", FormatSize(options.max_chunk_bytes)));
  }
  if (options.queue_depth == 0) {
    return absl::InvalidArgumentError("chunk store: io_uring queue depth must not be 0");
  }
  if (options.checksum_block_bytes == 0 || options.checksum_block_bytes % kBlockBytes != 0 ||
      options.checksum_block_bytes > std::numeric_limits<uint32_t>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunk store: checksum block size ", options.checksum_block_bytes,
                     " is not a multiple of ", kBlockBytes, " bytes under 4 GiB"));
  }
  if (options.partial_block_bytes == 0 || options.partial_block_bytes % kBlockBytes != 0 ||
      options.partial_block_bytes > std::numeric_limits<uint32_t>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunk store: partial chunks' block size ", options.partial_block_bytes,
                     " is not a multiple of ", kBlockBytes, " bytes under 4 GiB"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<ChunkStore>> ChunkStore::Open(const StoreOptions& options) {
  GRANARY_RETURN_IF_ERROR(ValidateOptions(options));
  for (const std::string& directory : options.directories) {
    GRANARY_RETURN_IF_ERROR(PrepareDirectory(directory));
  }
  GRANARY_ASSIGN_OR_RETURN(std::unique_ptr<ChunkIndex> index, ChunkIndex::Open(options.index_path));
  auto store = std::make_unique<DataFileChunkStore>(
      options, std::move(index), IoEngine::Create(options.use_io_uring, options.queue_depth));
  GRANARY_RETURN_IF_ERROR(store->Recover());
  return store;
}

}  // namespace granary::store
