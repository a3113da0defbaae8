#include "cache_server/read_path/batch_reads.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "cache_server/read_path/read_permission.h"
#include "common/base/parallel_for.h"
#include "common/base/printable.h"
#include "common/base/size.h"
#include "common/base/status.h"
#include "common/jobs/read_origin.h"
#include "common/net/local_read_socket.h"

namespace granary {
namespace {

// One path of a batch on its way to an answer.
struct Asked {
  absl::Status status;
  uint64_t file_id = 0;  // Canonical: the id whose chunks hold the bytes.
  uint64_t size = 0;
  std::optional<ReadThrough::WholeFile> file;
  bool fetch = false;                      // Not held whole; to be fetched.
  bool readable = false;                   // The caller may read it.
  ReadOrigin origin = ReadOrigin::kLocal;  // Where this batch found the bytes.
};

// The file `path` names in `manifest`, if it is a regular file.
absl::StatusOr<uint64_t> RegularFile(const Manifest& manifest, std::string_view path) {
  std::optional<uint64_t> id = manifest.Find(path);
  if (!id) {
    return absl::NotFoundError(absl::StrCat("dataset '", Printable(manifest.identity().name),
                                            "' has no file '", Printable(path), "'"));
  }
  if (manifest.entries()[*id].type != EntryType::kFile) {
    return absl::InvalidArgumentError(absl::StrCat("'", Printable(path), "' in dataset '",
                                                   Printable(manifest.identity().name),
                                                   "' is not a regular file"));
  }
  return *id;
}

}  // namespace

absl::Status BatchReads::Answer(const Caller& caller, const v1::BatchRequest& request,
                                v1::BatchAnswer* answer, std::vector<UniqueFd>* passed) {
  if (request.paths_size() > static_cast<int>(kMaxBatchFiles)) {
    return absl::InvalidArgumentError(
        absl::StrCat("a batch names ", request.paths_size(), " files; at most ", kMaxBatchFiles));
  }
  if (request.dataset().empty()) return absl::InvalidArgumentError("a batch names no dataset");
  uint64_t version = request.dataset_version();
  if (version == 0) {
    GRANARY_ASSIGN_OR_RETURN(version, catalog_->CurrentVersionOf(request.dataset()));
  }
  absl::StatusOr<std::shared_ptr<const Manifest>> manifest = catalog_->GetManifest(version);
  if (!manifest.ok() || (*manifest)->identity().name != request.dataset()) {
    return absl::NotFoundError(absl::StrCat("dataset '", Printable(request.dataset()),
                                            "' has no version ",
                                            absl::Hex(version, absl::kZeroPad16)));
  }
  const uint32_t chunk_size = (*manifest)->chunk_size();
  answer->set_dataset_version(version);
  answer->set_chunk_size(chunk_size);

  std::vector<Asked> asked(request.paths_size());
  for (int i = 0; i < request.paths_size(); ++i) {
    Asked& file = asked[i];
    absl::StatusOr<uint64_t> id = RegularFile(**manifest, request.paths(i));
    if (id.ok()) file.status = AllowFileRead(*policy_, *catalog_, caller, *manifest, *id);
    if (!id.ok() || !file.status.ok()) {
      if (file.status.ok()) file.status = id.status();
      continue;
    }
    file.readable = true;
    file.file_id = (*manifest)->CanonicalFileId(*id);
    file.size = (*manifest)->entries()[*id].size;
    if (file.size == 0) continue;
    absl::StatusOr<ReadThrough::WholeFile> held = reads_->OpenWholeFile(
        {version, file.file_id, 0}, file.size, chunk_size, WholeFileFetch::kHeldOnly);
    if (held.ok()) {
      file.file = std::move(*held);
    } else if (!absl::IsNotFound(held.status()) || !request.read_through()) {
      file.status = held.status();
    } else if (file.size > kMaxReadThroughFileBytes) {
      file.status = absl::FailedPreconditionError(
          absl::StrCat("'", Printable(request.paths(i)), "' has ", FormatSize(file.size),
                       ", more than a batch reads through (", FormatSize(kMaxReadThroughFileBytes),
                       "): read it by ranges"));
    } else {
      file.fetch = true;
    }
  }

  std::vector<Asked*> to_fetch;
  std::vector<ReadThrough::WholeFileAsk> fetch_asks;
  for (Asked& file : asked) {
    if (!file.fetch) continue;
    to_fetch.push_back(&file);
    fetch_asks.push_back({{version, file.file_id, 0}, file.size});
  }
  std::atomic<uint64_t> in_memory_left{kMaxInMemoryBytes};
  // Takes `bytes` of this batch's in-memory copies, if they are left.
  const auto take_in_memory = [&](uint64_t bytes) {
    uint64_t left = in_memory_left.load();
    while (left >= bytes && !in_memory_left.compare_exchange_weak(left, left - bytes)) {
    }
    return left >= bytes;
  };
  const auto settle = [&](Asked& file, absl::StatusOr<ReadThrough::WholeFile> opened) {
    if (opened.ok()) {
      file.file = std::move(*opened);
    } else {
      file.status = opened.status();
    }
  };
  const auto spent = [&](const Asked& file) {
    return absl::UnavailableError(absl::StrCat("file ", file.file_id,
                                               " could not be stored whole and this batch's "
                                               "in-memory copies are spent"));
  };

  // Files owned by other nodes come first, each owner asked for all of its
  // at once.
  const std::vector<ReadThrough::ChunkData> from_owners =
      reads_->FetchFromOwners(fetch_asks, chunk_size);
  std::vector<Asked*> rest;
  for (size_t i = 0; i < to_fetch.size(); ++i) {
    Asked& file = *to_fetch[i];
    if (from_owners[i] == nullptr) {
      file.origin = ReadOrigin::kSource;
      rest.push_back(&file);
      continue;
    }
    file.origin = ReadOrigin::kPeer;
    absl::StatusOr<ReadThrough::WholeFile> opened =
        reads_->OpenFetched({version, file.file_id, 0}, file.size, chunk_size);
    if (absl::IsNotFound(opened.status())) {
      opened = take_in_memory(file.size) ? ReadThrough::InMemoryCopy(*from_owners[i]) : spent(file);
    }
    settle(file, std::move(opened));
  }
  ParallelFor(rest.size(), kMaxFetchThreads, [&](size_t i) {
    Asked& file = *rest[i];
    const ChunkKey key{version, file.file_id, 0};
    absl::StatusOr<ReadThrough::WholeFile> opened =
        reads_->OpenWholeFile(key, file.size, chunk_size, WholeFileFetch::kReadThrough);
    if (absl::IsNotFound(opened.status())) {
      // Fetched, but the store did not keep it whole.
      opened = take_in_memory(file.size)
                   ? reads_->OpenWholeFile(key, file.size, chunk_size,
                                           WholeFileFetch::kReadThroughInMemory)
                   : spent(file);
    }
    settle(file, std::move(opened));
  });

  for (Asked& file : asked) {
    v1::BatchFile* answered = answer->add_files();
    answered->set_code(static_cast<int>(file.status.code()));
    answered->set_message(std::string(file.status.message()));
    answered->set_size(file.size);
    answered->set_file_id(file.file_id);
    answered->set_read_by_ranges(file.readable && file.size > 0 && !file.file);
    if (file.status.ok() && file.file) {
      answered->set_in_memory(file.file->in_memory);
      answered->set_origin(static_cast<uint32_t>(file.origin));
      passed->push_back(std::move(file.file->fd));
    }
  }
  return absl::OkStatus();
}

}  // namespace granary
