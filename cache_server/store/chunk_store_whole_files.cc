// DataFileChunkStore: data files handed out whole, the uses readers report
// of them, and the files withdrawn since (data_file_chunk_store.h).
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "cache_server/store/data_file_chunk_store.h"
#include "cache_server/store/held_blocks.h"
#include "common/base/absl_compat.h"
#include "common/base/logging.h"
#include "common/base/status.h"
#include "common/base/wall_clock.h"
#include "common/dataset/chunk_math.h"

namespace granary::store {
namespace {

bool SameTime(const struct timespec& a, const struct timespec& b) {
  return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

}  // namespace

absl::StatusOr<ChunkStore::WholeFile> DataFileChunkStore::OpenWholeFile(uint64_t dataset_version,
                                                                        uint64_t file_id,
                                                                        uint64_t size,
                                                                        uint32_t chunk_size,
                                                                        WholeFileUse use) {
  const SourceFile source{dataset_version, file_id};
  auto not_whole = [&](std::string_view why) {
    return absl::NotFoundError(absl::StrCat("file ", file_id, " of version ",
                                            absl::Hex(dataset_version, absl::kZeroPad16),
                                            " is not held whole: ", AsAbsl(why)));
  };
  if (size == 0 || chunk_size == 0) return not_whole("it is empty");
  const uint64_t chunk_count = ChunkCount(size, chunk_size);
  std::shared_ptr<DataFile> data_file;
  uint64_t generation = 0;
  bool verified = false;
  bool in_place = false;
  struct timespec verified_ctime = {};
  {
    MutexLock lock(&mu_);
    auto it = files_by_source_.find(source);
    if (it == files_by_source_.end()) return not_whole("no chunk of it is cached");
    CachedFile& file = files_.at(it->second);
    if (file.live_chunks - file.partial_chunks != chunk_count || file.pending_writes > 0) {
      return not_whole(absl::StrCat(file.live_chunks - file.partial_chunks, " of its ", chunk_count,
                                    " chunks are cached whole"));
    }
    if (file.file->direct_io()) return not_whole("its data file is padded for O_DIRECT");
    if (use == WholeFileUse::kReadNow) file.last_use_ms = NowUnixMs();
    data_file = file.file;
    generation = file.generation;
    verified = file.verified_generation == generation;
    in_place = file.verified_in_place;
    verified_ctime = file.verified_ctime;
  }
  GRANARY_ASSIGN_OR_RETURN(struct stat st, data_file->Stat());
  if (static_cast<uint64_t>(st.st_size) != size) {
    return not_whole(absl::StrCat("its data file has ", st.st_size, " bytes, not ", size));
  }
  // Bytes written into the file behind the store's back (a damaged disk
  // being repaired, a stray writer) change its ctime: verified again.
  verified = verified && SameTime(st.st_ctim, verified_ctime);
  if (!verified && use == WholeFileUse::kAhead) return not_whole("it is not verified yet");
  if (!verified || !in_place) {
    std::string scratch;
    for (uint64_t index = 0; index < chunk_count; ++index) {
      const ChunkKey key{dataset_version, file_id, static_cast<uint32_t>(index)};
      const std::string encoded = key.Encode();
      GRANARY_ASSIGN_OR_RETURN(std::optional<v1::ChunkLocation> location, index_->Get(encoded));
      const bool chunk_in_place = location && !IsPartial(*location) &&
                                  location->data_file_id() == data_file->id() &&
                                  location->offset() == index * chunk_size &&
                                  location->length() == ChunkLength(size, chunk_size, index);
      if (!chunk_in_place) return not_whole(absl::StrCat("chunk ", index, " is not in place"));
      if (verified) continue;
      if (absl::Status checked = VerifyChunk(*data_file, *location, scratch); !checked.ok()) {
        if (checked.code() == absl::StatusCode::kDataLoss) checksum_failures_++;
        GRANARY_LOG_FIRST_N(WARNING, 20)
            << "chunk store: dropping " << key.ToString() << ": " << checked.message();
        MutexLock lock(&mu_);
        DropLocked(encoded, *location);
        return not_whole(std::string(checked.message()));
      }
    }
    MutexLock lock(&mu_);
    auto it = files_.find(data_file->id());
    if (it == files_.end() || it->second.generation != generation) {
      return not_whole("it changed while it was being verified");
    }
    it->second.verified_generation = generation;
    it->second.verified_ctime = st.st_ctim;
    it->second.verified_in_place = true;
  }
  UniqueFd fd(::open(data_file->path().c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return not_whole("its data file has just been evicted");
  if (use == WholeFileUse::kAhead) {
    whole_files_ahead_++;
  } else {
    hits_ += chunk_count;
    whole_files_++;
  }
  return WholeFile{.fd = std::move(fd),
                   .verified_ctime_ns = st.st_ctim.tv_sec * 1000000000 + st.st_ctim.tv_nsec};
}

void DataFileChunkStore::RecordUse(uint64_t dataset_version, uint64_t file_id, uint64_t chunks) {
  hits_ += chunks;
  MutexLock lock(&mu_);
  auto it = files_by_source_.find({dataset_version, file_id});
  if (it != files_by_source_.end()) files_.at(it->second).last_use_ms = NowUnixMs();
}

ChunkStore::Withdrawn DataFileChunkStore::WithdrawnSince(uint64_t after) {
  // Bounded, so that an answer fits in one local read message.
  constexpr size_t kMaxListed = 2048;
  Withdrawn answer;
  MutexLock lock(&mu_);
  const uint64_t last = withdrawn_first_ + withdrawn_.size() - 1;
  if (after + 1 < withdrawn_first_ || after > last) {
    answer.through = last;
    return answer;
  }
  answer.complete = true;
  answer.through = std::min<uint64_t>(last, after + kMaxListed);
  for (uint64_t number = after + 1; number <= answer.through; ++number) {
    answer.files.push_back(withdrawn_[number - withdrawn_first_]);
  }
  return answer;
}

}  // namespace granary::store
