#include "cache_server/read_path/read_through.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "common/base/filled_string.h"
#include "common/base/logging.h"
#include "common/base/memory_file.h"
#include "common/base/parallel_for.h"
#include "common/base/status.h"
#include "common/dataset/chunk_math.h"

namespace granary {
namespace {

// A reader's whole file in memory, filled: sealed against any change.
absl::StatusOr<LocalWholeFile> SealedInMemory(MemoryFile memory) {
  GRANARY_RETURN_IF_ERROR(memory.Seal(MemoryFile::kUnchangeable | F_SEAL_SEAL));
  return LocalWholeFile{std::move(memory).Release(), /*verified_ctime_ns=*/0, /*in_memory=*/true};
}

}  // namespace

absl::StatusOr<const ManifestEntry*> ChunkEntry(const Manifest& manifest, const ChunkKey& key) {
  const ManifestEntries& entries = manifest.entries();
  if (key.file_id >= entries.size()) {
    return absl::OutOfRangeError(absl::StrCat(
        "chunk ", key.ToString(), ": file id ", key.file_id, " is past the end of dataset '",
        manifest.identity().name, "' (", entries.size(), " entries)"));
  }
  const ManifestEntry& entry = entries[key.file_id];
  if (entry.type != EntryType::kFile) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunk ", key.ToString(), ": '", entry.path, "' is not a regular file"));
  }
  uint64_t chunks = ChunkCount(entry.size, manifest.chunk_size());
  if (key.chunk_index >= chunks) {
    return absl::OutOfRangeError(absl::StrCat("chunk ", key.ToString(), ": file '", entry.path,
                                              "' has ", chunks, " chunks"));
  }
  return &entry;
}

ReadThrough::ReadThrough(Catalog* catalog, store::ChunkStore* store, ServerMetrics* metrics,
                         VersionActivity* activity, ClusterView* cluster, WriteBehind* write_behind,
                         Sources* sources)
    : catalog_(catalog),
      store_(store),
      metrics_(metrics),
      activity_(activity),
      cluster_(cluster),
      write_behind_(write_behind),
      sources_(sources) {}

absl::StatusOr<ReadThrough::RangeRead> ReadThrough::Read(const ChunkKey& key, uint32_t offset,
                                                         uint32_t length, ChunkSourcing sourcing) {
  return ReadStart(key, offset, length, length, sourcing);
}

absl::StatusOr<ReadThrough::RangeRead> ReadThrough::ReadStart(const ChunkKey& key, uint32_t offset,
                                                              uint32_t length, uint32_t read_length,
                                                              ChunkSourcing sourcing) {
  GRANARY_ASSIGN_OR_RETURN(std::shared_ptr<const Manifest> manifest,
                           catalog_->GetManifest(key.dataset_version));
  GRANARY_ASSIGN_OR_RETURN(const ManifestEntry* entry, ChunkEntry(*manifest, key));
  const uint32_t chunk_length = ChunkLength(entry->size, manifest->chunk_size(), key.chunk_index);
  if (offset > chunk_length) {
    return absl::OutOfRangeError(absl::StrCat("offset ", offset, " is past the end of chunk ",
                                              key.ToString(), " (", chunk_length, " bytes)"));
  }
  const uint32_t end =
      length == 0
          ? chunk_length
          : static_cast<uint32_t>(std::min<uint64_t>(chunk_length, uint64_t{offset} + length));
  activity_->Touch(key.dataset_version);
  absl::StatusOr<std::string> stored = store_->ReadRange(key, offset, end - offset);
  if (stored.ok()) {
    metrics_->hits.fetch_add(1, std::memory_order_relaxed);
    metrics_->bytes_from_cache.fetch_add(stored->size(), std::memory_order_relaxed);
    return RangeRead{std::make_shared<const std::string>(*std::move(stored)), true, chunk_length,
                     nullptr};
  }
  if (!absl::IsNotFound(stored.status())) {
    GRANARY_LOG(WARNING) << "store read of " << key.ToString()
                         << " failed, reading the source: " << stored.status();
  }
  if (ChunkData pending = write_behind_->Pending(key)) {
    // Fetched a moment ago and waiting to be stored: a hit from memory.
    metrics_->hits.fetch_add(1, std::memory_order_relaxed);
    metrics_->bytes_from_cache.fetch_add(end - offset, std::memory_order_relaxed);
    if (offset == 0 && end == pending->size()) {
      return RangeRead{pending, true, chunk_length, pending};
    }
    return RangeRead{std::make_shared<const std::string>(pending->substr(offset, end - offset)),
                     true, chunk_length, std::move(pending)};
  }
  const uint64_t read_end = read_length == 0
                                ? chunk_length
                                : std::min<uint64_t>(chunk_length, uint64_t{offset} + read_length);
  if (Blocks pending = write_behind_->PendingBlocks(key, offset, end); pending.data) {
    // Blocks fetched a moment ago and waiting to be stored: a hit from memory.
    metrics_->hits.fetch_add(1, std::memory_order_relaxed);
    metrics_->bytes_from_cache.fetch_add(end - offset, std::memory_order_relaxed);
    auto data = std::make_shared<const std::string>(
        pending.data->substr(offset - pending.offset, end - offset));
    // They serve the rest of the range only if they reach its end.
    if (pending.offset + pending.data->size() < read_end) {
      return RangeRead{std::move(data), true, chunk_length, nullptr};
    }
    return RangeRead{std::move(data), true, chunk_length, std::move(pending.data), pending.offset};
  }
  if (sourcing == ChunkSourcing::kCacheOnly) {
    return absl::NotFoundError(absl::StrCat("chunk ", key.ToString(), " is not cached here"));
  }
  if (offset < read_end && !(offset == 0 && read_end == chunk_length)) {
    GRANARY_ASSIGN_OR_RETURN(Blocks blocks, FetchBlocksMiss(manifest, *entry, key, offset, read_end,
                                                            chunk_length, sourcing));
    return RangeRead{std::make_shared<const std::string>(
                         blocks.data->substr(offset - blocks.offset, end - offset)),
                     false, chunk_length, std::move(blocks.data), blocks.offset};
  }
  GRANARY_ASSIGN_OR_RETURN(ChunkData data, FetchMiss(manifest, key, sourcing, Storing::kBehind));
  if (offset == 0 && end == data->size()) return RangeRead{data, false, chunk_length, data};
  return RangeRead{std::make_shared<const std::string>(data->substr(offset, end - offset)), false,
                   chunk_length, std::move(data)};
}

absl::StatusOr<ReadThrough::ChunkData> ReadThrough::ReadMore(const ChunkKey& key, uint32_t offset,
                                                             uint32_t length,
                                                             ChunkSourcing sourcing) {
  absl::StatusOr<std::string> stored = store_->ReadRange(key, offset, length);
  if (stored.ok()) {
    metrics_->bytes_from_cache.fetch_add(stored->size(), std::memory_order_relaxed);
    return std::make_shared<const std::string>(*std::move(stored));
  }
  GRANARY_ASSIGN_OR_RETURN(RangeRead read, Read(key, offset, length, sourcing));
  return std::move(read.data);
}

absl::Status ReadThrough::Serve(const ChunkKey& key, uint32_t offset, uint32_t length,
                                ChunkSourcing sourcing, uint32_t piece_bytes, RangeSink& sink) {
  const auto started = std::chrono::steady_clock::now();
  const uint32_t first = length == 0 ? piece_bytes : std::min(length, piece_bytes);
  GRANARY_ASSIGN_OR_RETURN(RangeRead read, ReadStart(key, offset, first, length, sourcing));
  metrics_->read_latency.Observe(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  const uint64_t end = length == 0
                           ? read.chunk_length
                           : std::min<uint64_t>(read.chunk_length, uint64_t{offset} + length);
  if (!sink.Begin(end - offset, read.from_cache)) {
    return absl::CancelledError("the reader went away");
  }
  uint64_t position = offset;
  ChunkData piece = std::move(read.data);
  while (true) {
    position += piece->size();
    if (!sink.Write(*piece)) return absl::CancelledError("the reader went away");
    piece.reset();
    if (position >= end) return absl::OkStatus();
    if (read.whole != nullptr) {
      // The rest of a chunk in memory: the same read, not another one.
      if (read.from_cache) {
        metrics_->bytes_from_cache.fetch_add(end - position, std::memory_order_relaxed);
      }
      for (; position < end; position += piece_bytes) {
        const std::string_view rest = std::string_view(*read.whole)
                                          .substr(position - read.whole_offset,
                                                  std::min<uint64_t>(piece_bytes, end - position));
        if (!sink.Write(rest)) return absl::CancelledError("the reader went away");
      }
      return absl::OkStatus();
    }
    const uint32_t next = static_cast<uint32_t>(std::min<uint64_t>(piece_bytes, end - position));
    GRANARY_ASSIGN_OR_RETURN(piece, ReadMore(key, static_cast<uint32_t>(position), next, sourcing));
    if (piece->empty()) {
      return absl::InternalError(
          absl::StrCat("chunk ", key.ToString(), " ended at ", position, " of ", end, " bytes"));
    }
  }
}

absl::StatusOr<store::ChunkStore::Extent> ReadThrough::Locate(const ChunkKey& key,
                                                              uint64_t read_bytes) {
  activity_->Touch(key.dataset_version);
  GRANARY_ASSIGN_OR_RETURN(store::ChunkStore::Extent extent, store_->Locate(key));
  if (read_bytes > 0) {
    // The reader says how much it reads; no read serves more than the chunk.
    uint64_t served = std::min<uint64_t>(read_bytes, extent.location.length());
    metrics_->hits.fetch_add(1, std::memory_order_relaxed);
    metrics_->bytes_from_cache.fetch_add(served, std::memory_order_relaxed);
  }
  return extent;
}

absl::StatusOr<ReadThrough::WholeFile> ReadThrough::OpenWholeFile(const ChunkKey& file,
                                                                  uint64_t size,
                                                                  uint32_t chunk_size,
                                                                  WholeFileFetch fetch) {
  activity_->Touch(file.dataset_version);
  Fetched fetched;
  if (fetch == WholeFileFetch::kReadThrough) {
    GRANARY_ASSIGN_OR_RETURN(fetched, FetchWhole(file, size, chunk_size));
  }
  absl::StatusOr<store::ChunkStore::WholeFile> held = store_->OpenWholeFile(
      file.dataset_version, file.file_id, size, chunk_size, store::WholeFileUse::kReadNow);
  if (!held.ok()) {
    if (fetch == WholeFileFetch::kReadThroughInMemory && absl::IsNotFound(held.status())) {
      return ReadWholeIntoMemory(file, size, chunk_size);
    }
    return held.status();
  }
  // The chunks just fetched were counted as misses.
  metrics_->hits.fetch_add(ChunkCount(size, chunk_size) - fetched.chunks,
                           std::memory_order_relaxed);
  metrics_->bytes_from_cache.fetch_add(size - fetched.bytes, std::memory_order_relaxed);
  return WholeFile{std::move(held->fd), held->verified_ctime_ns, /*in_memory=*/false};
}

absl::StatusOr<ReadThrough::WholeFile> ReadThrough::OpenHeldAhead(const ChunkKey& file,
                                                                  uint64_t size,
                                                                  uint32_t chunk_size) {
  GRANARY_ASSIGN_OR_RETURN(store::ChunkStore::WholeFile held,
                           store_->OpenWholeFile(file.dataset_version, file.file_id, size,
                                                 chunk_size, store::WholeFileUse::kAhead));
  return WholeFile{std::move(held.fd), held.verified_ctime_ns, /*in_memory=*/false};
}

absl::StatusOr<std::shared_ptr<const Manifest>> ReadThrough::WholeFileManifest(
    const ChunkKey& file, uint64_t size, uint32_t chunk_size) {
  GRANARY_ASSIGN_OR_RETURN(std::shared_ptr<const Manifest> manifest,
                           catalog_->GetManifest(file.dataset_version));
  GRANARY_ASSIGN_OR_RETURN(const ManifestEntry* entry,
                           ChunkEntry(*manifest, {file.dataset_version, file.file_id, 0}));
  if (entry->size != size || manifest->chunk_size() != chunk_size) {
    return absl::InvalidArgumentError(absl::StrCat("file ", file.file_id, " has ", entry->size,
                                                   " bytes in chunks of ", manifest->chunk_size(),
                                                   ", not ", size, " in chunks of ", chunk_size));
  }
  return manifest;
}

absl::StatusOr<ReadThrough::WholeFile> ReadThrough::ReadWholeIntoMemory(const ChunkKey& file,
                                                                        uint64_t size,
                                                                        uint32_t chunk_size) {
  GRANARY_RETURN_IF_ERROR(WholeFileManifest(file, size, chunk_size).status());
  GRANARY_ASSIGN_OR_RETURN(MemoryFile memory, MemoryFile::Create("granary-read-through", size));
  for (uint64_t index = 0; index < ChunkCount(size, chunk_size); ++index) {
    const ChunkKey key{file.dataset_version, file.file_id, static_cast<uint32_t>(index)};
    GRANARY_ASSIGN_OR_RETURN(RangeRead read, Read(key, 0, 0));
    GRANARY_RETURN_IF_ERROR(memory.Write(index * chunk_size, *read.data));
  }
  return SealedInMemory(std::move(memory));
}

absl::StatusOr<ReadThrough::Fetched> ReadThrough::FetchWhole(const ChunkKey& file, uint64_t size,
                                                             uint32_t chunk_size) {
  GRANARY_ASSIGN_OR_RETURN(std::shared_ptr<const Manifest> manifest,
                           WholeFileManifest(file, size, chunk_size));
  Fetched fetched;
  for (uint64_t index = 0; index < ChunkCount(size, chunk_size); ++index) {
    const ChunkKey key{file.dataset_version, file.file_id, static_cast<uint32_t>(index)};
    if (store_->Contains(key)) continue;
    GRANARY_ASSIGN_OR_RETURN(ChunkData chunk, FetchMiss(manifest, key, ChunkSourcing::kReadThrough,
                                                        Storing::kBeforeReturn));
    ++fetched.chunks;
    fetched.bytes += chunk->size();
    // Fetched a moment earlier by a reader's miss, it may still wait to be
    // stored behind: stored now (a second insert of a key is a no-op).
    if (!store_->Contains(key)) {
      absl::StatusOr<bool> stored = store_->Insert(key, chunk_size, *chunk);
      if (!stored.ok()) return stored.status();
    }
  }
  return fetched;
}

std::vector<ReadThrough::ChunkData> ReadThrough::FetchFromOwners(std::span<const WholeFileAsk> asks,
                                                                 uint32_t chunk_size) {
  std::vector<ChunkData> fetched(asks.size());
  if (asks.empty()) return fetched;
  const uint64_t version = asks.front().file.dataset_version;
  absl::StatusOr<std::shared_ptr<const Manifest>> manifest = catalog_->GetManifest(version);
  if (!manifest.ok() || (*manifest)->chunk_size() != chunk_size) return fetched;
  activity_->Touch(version);
  // Each owner elsewhere, with the asks it is to answer.
  std::vector<std::pair<Member, std::vector<size_t>>> owners;
  for (size_t i = 0; i < asks.size(); ++i) {
    const WholeFileAsk& ask = asks[i];
    if (ask.file.dataset_version != version || ask.file.chunk_index != 0 || ask.size == 0 ||
        ask.size > chunk_size) {
      continue;
    }
    absl::StatusOr<const ManifestEntry*> entry = ChunkEntry(**manifest, ask.file);
    if (!entry.ok() || (*entry)->size != ask.size) continue;
    std::optional<Member> owner = cluster_->OwnerElsewhere(ask.file);
    if (!owner) continue;
    auto same = std::find_if(owners.begin(), owners.end(),
                             [&](const auto& listed) { return listed.first.id == owner->id; });
    if (same == owners.end()) same = owners.insert(owners.end(), {*std::move(owner), {}});
    same->second.push_back(i);
  }
  ParallelFor(owners.size(), owners.size(), [&](size_t o) {
    FetchFromOwner(owners[o].first, *manifest, asks, owners[o].second, fetched);
  });
  return fetched;
}

void ReadThrough::FetchFromOwner(const Member& owner,
                                 const std::shared_ptr<const Manifest>& manifest,
                                 std::span<const WholeFileAsk> asks, std::span<const size_t> which,
                                 std::vector<ChunkData>& fetched) {
  absl::StatusOr<const DatasetClient*> reader = cluster_->clients().Reader(owner);
  if (!reader.ok()) return;
  std::vector<std::string> bytes;
  std::vector<DatasetClient::ChunkRead> reads;
  bytes.reserve(which.size());
  for (size_t i : which) {
    bytes.push_back(UnzeroedString(asks[i].size));
    reads.push_back({asks[i].file, std::span<char>(bytes.back())});
  }
  readers_waiting_.fetch_add(static_cast<int>(which.size()), std::memory_order_relaxed);
  const std::vector<absl::Status> read = (*reader)->ReadChunks(reads, ChunkSourcing::kOwnerFetch);
  last_reader_miss_.store(std::chrono::steady_clock::now().time_since_epoch().count(),
                          std::memory_order_relaxed);
  readers_waiting_.fetch_sub(static_cast<int>(which.size()), std::memory_order_relaxed);
  bool suspected = false;
  for (size_t r = 0; r < which.size(); ++r) {
    const ChunkKey& key = asks[which[r]].file;
    if (!read[r].ok()) {
      // One failure of the owner's own (a lost connection fails every read
      // after it) is noted once.
      if (!suspected) suspected = NoteFailedPeerRead(owner, key, read[r]);
      continue;
    }
    metrics_->misses.fetch_add(1, std::memory_order_relaxed);
    metrics_->peer_copies.fetch_add(1, std::memory_order_relaxed);
    metrics_->bytes_from_peers.fetch_add(bytes[r].size(), std::memory_order_relaxed);
    auto chunk = std::make_shared<const std::string>(std::move(bytes[r]));
    absl::StatusOr<bool> stored = store_->Insert(key, manifest->chunk_size(), *chunk);
    if (!stored.ok()) {
      GRANARY_LOG_FIRST_N(WARNING, 10)
          << "cannot store " << key.ToString() << ": " << stored.status();
    }
    fetched[which[r]] = std::move(chunk);
    if (miss_listener_) miss_listener_(manifest, key);
  }
}

absl::StatusOr<ReadThrough::WholeFile> ReadThrough::OpenFetched(const ChunkKey& file, uint64_t size,
                                                                uint32_t chunk_size) {
  GRANARY_ASSIGN_OR_RETURN(store::ChunkStore::WholeFile held,
                           store_->OpenWholeFile(file.dataset_version, file.file_id, size,
                                                 chunk_size, store::WholeFileUse::kReadNow));
  return WholeFile{std::move(held.fd), held.verified_ctime_ns, /*in_memory=*/false};
}

absl::StatusOr<ReadThrough::WholeFile> ReadThrough::InMemoryCopy(std::string_view data) {
  GRANARY_ASSIGN_OR_RETURN(MemoryFile memory,
                           MemoryFile::Create("granary-read-through", data.size()));
  GRANARY_RETURN_IF_ERROR(memory.Write(0, data));
  return SealedInMemory(std::move(memory));
}

store::ChunkStore::Withdrawn ReadThrough::RecordUses(const v1::UseReport& report) {
  // Versions the catalog does not hold (released or removed meanwhile) are
  // not tracked: nothing would forget them again.
  for (uint64_t version : report.kept_versions()) {
    if (catalog_->HasVersion(version)) activity_->Keep(version);
  }
  for (const v1::FileUse& use : report.files()) {
    if (catalog_->HasVersion(use.dataset_version())) activity_->Touch(use.dataset_version());
    store_->RecordUse(use.dataset_version(), use.file_id(), use.chunks());
    metrics_->hits.fetch_add(use.chunks(), std::memory_order_relaxed);
    metrics_->bytes_from_cache.fetch_add(use.bytes(), std::memory_order_relaxed);
  }
  return store_->WithdrawnSince(report.withdrawn_after());
}

bool ReadThrough::ReadersMissedWithin(std::chrono::steady_clock::duration window) const {
  if (readers_waiting_.load(std::memory_order_relaxed) > 0) return true;
  const std::chrono::steady_clock::time_point last{
      std::chrono::steady_clock::duration(last_reader_miss_.load(std::memory_order_relaxed))};
  return std::chrono::steady_clock::now() - last < window;
}

absl::StatusOr<ReadThrough::ChunkData> ReadThrough::FetchMiss(
    const std::shared_ptr<const Manifest>& manifest, const ChunkKey& key, ChunkSourcing sourcing,
    Storing storing) {
  metrics_->misses.fetch_add(1, std::memory_order_relaxed);
  readers_waiting_.fetch_add(1, std::memory_order_relaxed);
  absl::StatusOr<ChunkData> fetched =
      FetchFor(*manifest, key, sourcing, storing, SourceUse::kReader);
  last_reader_miss_.store(std::chrono::steady_clock::now().time_since_epoch().count(),
                          std::memory_order_relaxed);
  readers_waiting_.fetch_sub(1, std::memory_order_relaxed);
  if (miss_listener_) miss_listener_(manifest, key);
  return fetched;
}

absl::StatusOr<ReadThrough::Blocks> ReadThrough::FetchBlocksMiss(
    const std::shared_ptr<const Manifest>& manifest, const ManifestEntry& entry,
    const ChunkKey& key, uint64_t offset, uint64_t end, uint32_t chunk_length,
    ChunkSourcing sourcing) {
  const uint64_t block_bytes = store_->partial_block_bytes(manifest->chunk_size());
  const BlockRange range{
      key, offset / block_bytes * block_bytes,
      std::min<uint64_t>(chunk_length, (end + block_bytes - 1) / block_bytes * block_bytes),
      sourcing};
  metrics_->misses.fetch_add(1, std::memory_order_relaxed);
  readers_waiting_.fetch_add(1, std::memory_order_relaxed);
  absl::StatusOr<Blocks> blocks = block_flights_.Do(
      range, [&] { return FetchBlocksOnce(*manifest, entry, range, chunk_length); });
  last_reader_miss_.store(std::chrono::steady_clock::now().time_since_epoch().count(),
                          std::memory_order_relaxed);
  readers_waiting_.fetch_sub(1, std::memory_order_relaxed);
  if (blocks.ok() && miss_listener_) miss_listener_(manifest, key);
  return blocks;
}

absl::StatusOr<ReadThrough::Blocks> ReadThrough::FetchBlocksOnce(const Manifest& manifest,
                                                                 const ManifestEntry& entry,
                                                                 const BlockRange& range,
                                                                 uint32_t chunk_length) {
  // A flight for these blocks may have fetched them between our miss and
  // this flight: they wait to be stored, or are stored.
  if (Blocks pending = write_behind_->PendingBlocks(range.key, range.begin, range.end);
      pending.data) {
    return pending;
  }
  if (absl::StatusOr<std::string> stored =
          store_->ReadRange(range.key, range.begin, range.end - range.begin);
      stored.ok()) {
    return Blocks{std::make_shared<const std::string>(*std::move(stored)),
                  static_cast<uint32_t>(range.begin)};
  }
  GRANARY_ASSIGN_OR_RETURN(
      ChunkData data,
      Obtain(manifest, entry, range.key, static_cast<uint32_t>(range.begin),
             static_cast<uint32_t>(range.end - range.begin), range.sourcing, SourceUse::kReader));
  // Stored behind the answer: the reader waits for the source, not the store.
  write_behind_->StoreBlocks(range.key, manifest.chunk_size(), chunk_length,
                             static_cast<uint32_t>(range.begin), data);
  return Blocks{std::move(data), static_cast<uint32_t>(range.begin)};
}

bool ReadThrough::Holds(const ChunkKey& key) {
  return store_->Contains(key) || write_behind_->Pending(key) != nullptr;
}

absl::StatusOr<ReadThrough::ChunkData> ReadThrough::Fetch(const Manifest& manifest,
                                                          const ChunkKey& key,
                                                          ChunkSourcing sourcing, Storing storing) {
  return FetchFor(manifest, key, sourcing, storing, SourceUse::kFill);
}

absl::StatusOr<ReadThrough::ChunkData> ReadThrough::FetchFor(const Manifest& manifest,
                                                             const ChunkKey& key,
                                                             ChunkSourcing sourcing,
                                                             Storing storing, SourceUse use) {
  return flights_.Do(key, [&] { return FetchOnce(manifest, key, sourcing, storing, use); });
}

absl::StatusOr<ReadThrough::ChunkData> ReadThrough::FetchOnce(const Manifest& manifest,
                                                              const ChunkKey& key,
                                                              ChunkSourcing sourcing,
                                                              Storing storing, SourceUse use) {
  // A flight for this key may have fetched it between our miss and this
  // flight: it waits to be stored, or is stored.
  if (ChunkData pending = write_behind_->Pending(key)) return pending;
  if (store_->Contains(key)) {
    absl::StatusOr<std::string> stored = store_->Read(key);
    if (stored.ok()) return std::make_shared<const std::string>(*std::move(stored));
  }
  GRANARY_ASSIGN_OR_RETURN(const ManifestEntry* entry, ChunkEntry(manifest, key));
  uint32_t length = ChunkLength(entry->size, manifest.chunk_size(), key.chunk_index);
  GRANARY_ASSIGN_OR_RETURN(ChunkData fetched,
                           Obtain(manifest, *entry, key, 0, length, sourcing, use));
  if (storing == Storing::kBehind) {
    write_behind_->Store(key, manifest.chunk_size(), fetched);
    return fetched;
  }
  absl::StatusOr<bool> stored = store_->Insert(key, manifest.chunk_size(), *fetched);
  if (!stored.ok()) {
    GRANARY_LOG_FIRST_N(WARNING, 10)
        << "cannot store " << key.ToString() << ": " << stored.status();
  }
  return fetched;
}

absl::StatusOr<std::string> ReadThrough::FetchFromOwner(const ChunkKey& key, uint32_t offset,
                                                        uint32_t length, ChunkSourcing sourcing) {
  if (sourcing == ChunkSourcing::kOwnerFetch) return absl::NotFoundError("asked as the owner");
  std::optional<Member> owner = cluster_->OwnerElsewhere(key);
  if (!owner.has_value()) return absl::NotFoundError("this node owns the chunk");
  // Whatever the owner's trouble, this node can still copy the chunk or read
  // the source itself.
  return ReadFromPeer(*owner, key, offset, length, ChunkSourcing::kOwnerFetch);
}

absl::StatusOr<ReadThrough::ChunkData> ReadThrough::Obtain(const Manifest& manifest,
                                                           const ManifestEntry& entry,
                                                           const ChunkKey& key, uint32_t offset,
                                                           uint32_t length, ChunkSourcing sourcing,
                                                           SourceUse use) {
  absl::StatusOr<std::string> data = FetchFromOwner(key, offset, length, sourcing);
  if (!data.ok()) {
    // Without a peer to copy from (a lone node, a single group), a miss
    // neither counts toward the peers' probes nor times a peer fetch.
    const std::vector<Member> peers = cluster_->CopySources(key);
    if (!peers.empty() && speeds_.PreferPeers()) data = CopyFromPeer(peers, key, offset, length);
  }
  if (!data.ok()) return ReadLacking(manifest, entry, key, offset, length, use);
  metrics_->peer_copies.fetch_add(1, std::memory_order_relaxed);
  metrics_->bytes_from_peers.fetch_add(data->size(), std::memory_order_relaxed);
  return std::make_shared<const std::string>(*std::move(data));
}

absl::StatusOr<std::string> ReadThrough::CopyFromPeer(std::span<const Member> peers,
                                                      const ChunkKey& key, uint32_t offset,
                                                      uint32_t length) {
  const FetchSpeeds::Fetch fetch = speeds_.Begin(FetchSpeeds::Path::kPeer);
  for (const Member& peer : peers) {
    absl::StatusOr<std::string> data =
        ReadFromPeer(peer, key, offset, length, ChunkSourcing::kCacheOnly);
    if (data.ok()) {
      speeds_.End(fetch, length);
      return data;
    }
  }
  speeds_.End(fetch, 0);
  return absl::NotFoundError(absl::StrCat("no peer holds bytes [", offset, ", ",
                                          uint64_t{offset} + length, ") of chunk ",
                                          key.ToString()));
}

absl::StatusOr<std::string> ReadThrough::ReadFromPeer(const Member& peer, const ChunkKey& key,
                                                      uint32_t offset, uint32_t length,
                                                      ChunkSourcing sourcing) {
  GRANARY_ASSIGN_OR_RETURN(const DatasetClient* reader, cluster_->clients().Reader(peer));
  absl::StatusOr<std::string> data = FilledString(
      length, [&](std::span<char> out) { return reader->ReadChunk(key, offset, out, sourcing); });
  if (!data.ok()) NoteFailedPeerRead(peer, key, data.status());
  return data;
}

bool ReadThrough::NoteFailedPeerRead(const Member& peer, const ChunkKey& key,
                                     const absl::Status& read) {
  if (absl::IsNotFound(read) || !ShouldTryAnotherOwner(read)) return false;
  metrics_->peer_copy_errors.fetch_add(1, std::memory_order_relaxed);
  cluster_->clients().MarkSuspect(peer.id);
  GRANARY_LOG_FIRST_N(WARNING, 20) << "reading chunk " << key.ToString() << " from peer " << peer.id
                                   << " (" << peer.address << "): " << read;
  return true;
}

absl::StatusOr<ReadThrough::ChunkData> ReadThrough::ReadLacking(const Manifest& manifest,
                                                                const ManifestEntry& entry,
                                                                const ChunkKey& key,
                                                                uint64_t offset, uint64_t length,
                                                                SourceUse use) {
  SourceReadsInFlight::Reading reading =
      reads_in_flight_.Begin(key, offset, offset + length, use == SourceUse::kReader);
  // Bytes read a moment ago wait to be stored: as good as a read in flight.
  std::vector<SourceReadsInFlight::Earlier> earlier = reading.earlier();
  for (WriteBehind::Blocks& pending : write_behind_->PendingOf(key)) {
    earlier.push_back(SourceReadsInFlight::Earlier::Done(pending.offset, std::move(pending.data)));
  }
  std::sort(earlier.begin(), earlier.end(),
            [](const auto& a, const auto& b) { return a.begin < b.begin; });
  GRANARY_ASSIGN_OR_RETURN(std::string bytes,
                           Assemble(manifest, entry, key, offset, offset + length, use, earlier));
  auto data = std::make_shared<const std::string>(std::move(bytes));
  reading.Finish(data);
  return data;
}

absl::StatusOr<std::string> ReadThrough::Assemble(
    const Manifest& manifest, const ManifestEntry& entry, const ChunkKey& key, uint64_t offset,
    uint64_t end, SourceUse use, std::span<const SourceReadsInFlight::Earlier> earlier) {
  std::string bytes;
  uint64_t done = offset;  // The bytes before it are in `bytes`.
  auto append_from_source = [&](uint64_t until) -> absl::Status {
    if (until <= done) return absl::OkStatus();
    GRANARY_ASSIGN_OR_RETURN(std::string read,
                             ReadSource(manifest, entry, key, done, until - done, use));
    if (bytes.empty()) {
      bytes = std::move(read);
    } else {
      bytes.append(read);
    }
    done = until;
    return absl::OkStatus();
  };
  // Bytes up to `until` that the store does not hold: those an earlier read
  // is fetching are taken from it, the rest read.
  auto append_lacking = [&](uint64_t until) -> absl::Status {
    for (const SourceReadsInFlight::Earlier& read : earlier) {
      const uint64_t begin = std::max(read.begin, done);
      const uint64_t stop = std::min(read.end, until);
      if (begin >= stop) continue;
      GRANARY_RETURN_IF_ERROR(append_from_source(begin));
      const SourceReadsInFlight::Bytes& theirs = read.bytes.get();
      // A read that failed leaves its bytes to be read with the rest.
      if (theirs == nullptr || theirs->size() < stop - read.begin) continue;
      bytes.append(*theirs, begin - read.begin, stop - begin);
      done = stop;
    }
    return append_from_source(until);
  };
  for (const store::HeldExtent& held : store_->HeldExtentsOf(key)) {
    const uint64_t begin = std::max(held.begin, done);
    const uint64_t stop = std::min(held.end, end);
    if (begin >= stop) continue;
    // Held bytes that no longer read (dropped since, or a block damaged) are
    // read from the source with the rest.
    absl::StatusOr<std::string> stored = store_->ReadRange(key, begin, stop - begin);
    if (!stored.ok()) continue;
    GRANARY_RETURN_IF_ERROR(append_lacking(begin));
    bytes.append(*stored);
    done = stop;
  }
  GRANARY_RETURN_IF_ERROR(append_lacking(end));
  return bytes;
}

absl::StatusOr<std::string> ReadThrough::ReadSource(const Manifest& manifest,
                                                    const ManifestEntry& entry, const ChunkKey& key,
                                                    uint64_t offset, uint64_t length,
                                                    SourceUse use) {
  const uint64_t start = static_cast<uint64_t>(key.chunk_index) * manifest.chunk_size() + offset;
  metrics_->source_reads.fetch_add(1, std::memory_order_relaxed);
  const std::chrono::system_clock::time_point began =
      journal_ ? std::chrono::system_clock::now() : std::chrono::system_clock::time_point();
  const FetchSpeeds::Fetch fetch = speeds_.Begin(FetchSpeeds::Path::kSource);
  absl::StatusOr<std::shared_ptr<const Source>> source =
      sources_->OpenToRead(manifest.identity().source);
  absl::Status status = source.status();
  std::string bytes;
  bool metadata_changed = false;
  // A reader's read is one turn; a fill's may be cut into pieces, each
  // taking the turn readers leave it.
  for (uint64_t done = 0; status.ok() && done < length;) {
    const SourceTurns::Turn turn = use == SourceUse::kReader ? turns_.Reader() : turns_.Fill();
    if (turn.waited_for_readers()) {
      metrics_->fill_source_waits.fetch_add(1, std::memory_order_relaxed);
    }
    const uint64_t piece = std::min(length - done, turn.max_bytes());
    absl::StatusOr<Source::Range> read =
        (*source)->ReadRangeNoticingChanges(entry, start + done, piece);
    if (!read.ok()) {
      status = read.status();
      break;
    }
    metadata_changed |= read->metadata_changed;
    if (piece == length) {
      bytes = std::move(read->bytes);
    } else {
      if (done == 0) bytes.reserve(length);
      bytes.append(read->bytes);
    }
    done += piece;
  }
  speeds_.End(fetch, status.ok() ? bytes.size() : 0);
  if (!status.ok()) {
    metrics_->source_errors.fetch_add(1, std::memory_order_relaxed);
    return absl::Status(status.code(), absl::StrCat("dataset '", manifest.identity().name,
                                                    "': ", status.message()));
  }
  if (metadata_change_listener_ && metadata_changed) {
    metadata_change_listener_(manifest, entry.path);
  }
  metrics_->bytes_from_source.fetch_add(bytes.size(), std::memory_order_relaxed);
  if (journal_) {
    journal_->SourceRead(
        manifest.identity().name, key, offset, bytes.size(),
        use == SourceUse::kReader ? SourceJournal::ReadFor::kReader : SourceJournal::ReadFor::kFill,
        began);
  }
  return bytes;
}

}  // namespace granary
