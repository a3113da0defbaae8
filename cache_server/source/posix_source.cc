#include "cache_server/source/posix_source.h"

#include "common/status.h"
#include "common/verified_source_file.h"

namespace granary {

absl::StatusOr<std::string> ReadPosixFileRange(const std::string& root, const ManifestEntry& entry,
                                               uint64_t offset, uint32_t length) {
  GRANARY_ASSIGN_OR_RETURN(VerifiedSourceFile file, VerifiedSourceFile::Open(root, entry));
  std::string data(length, '\0');
  GRANARY_RETURN_IF_ERROR(file.ReadExactly(offset, data));
  return data;
}

}  // namespace granary
