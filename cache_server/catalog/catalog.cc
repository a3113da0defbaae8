#include "cache_server/catalog/catalog.h"

#include <algorithm>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "common/base/absl_compat.h"
#include "common/base/big_endian.h"
#include "common/base/logging.h"
#include "common/base/status.h"
#include "common/dataset/chunk_key.h"
#include "common/dataset/posix_acl.h"
#include "rocksdb/db.h"
#include "rocksdb/options.h"
#include "rocksdb/write_batch.h"

namespace granary {
namespace {

constexpr char kDatasetPrefix = 'd';
constexpr char kManifestPrefix = 'm';
constexpr char kPendingPrefix = 'p';

std::string DatasetKey(std::string_view name) {
  std::string key(1, kDatasetPrefix);
  key.append(name);
  return key;
}

std::string ManifestPrefix(uint64_t version) {
  std::string key(1, kManifestPrefix);
  AppendBigEndian(version, 8, &key);
  return key;
}

// Page keys are the prefix and 4 more bytes, so this bound is past them all.
std::string PastManifestPages(uint64_t version) {
  return ManifestPrefix(version) + std::string(5, '\xff');
}

// Marks `version`'s pages as written before the record that names them.
std::string PendingKey(uint64_t version) {
  std::string key(1, kPendingPrefix);
  AppendBigEndian(version, 8, &key);
  return key;
}

std::string ManifestPageKey(uint64_t version, uint32_t page) {
  std::string key = ManifestPrefix(version);
  AppendBigEndian(page, 4, &key);
  return key;
}

absl::Status RocksStatus(const rocksdb::Status& status, std::string_view what) {
  if (status.ok()) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("catalog: ", AsAbsl(what), ": ", status.ToString()));
}

v1::CatalogVersion VersionRecord(const Manifest& manifest, int64_t now_unix_ms) {
  v1::CatalogVersion record;
  record.set_version(manifest.version());
  record.set_created_unix_ms(now_unix_ms);
  record.set_file_count(manifest.file_count());
  record.set_directory_count(manifest.directory_count());
  record.set_total_bytes(manifest.total_bytes());
  record.set_chunk_count(manifest.chunk_count());
  record.set_entry_count(manifest.entries().size());
  for (const SkippedEntry& skipped : manifest.skipped().listed) {
    v1::SkippedEntry* added = record.add_skipped();
    added->set_path(skipped.path);
    added->set_reason(skipped.reason);
  }
  record.set_skipped_count(manifest.skipped().count);
  record.set_owner_only_count(static_cast<uint64_t>(std::count_if(
      manifest.entries().begin(), manifest.entries().end(),
      [](const ManifestEntry& entry) { return AclKindOf(entry) == AclKind::kUnevaluable; })));
  return record;
}

uint64_t CurrentVersion(const v1::CatalogDataset& record) {
  return record.versions().empty() ? 0 : record.versions().rbegin()->version();
}

// The order in which changes of one name win: the later change, and between
// changes made in the same millisecond on two clocks, removal and then the
// higher version, so every server picks the same record.
bool ChangedLater(const v1::CatalogDataset& a, const v1::CatalogDataset& b) {
  return std::tuple(a.updated_unix_ms(), a.removed(), CurrentVersion(a)) >
         std::tuple(b.updated_unix_ms(), b.removed(), CurrentVersion(b));
}

}  // namespace

Catalog::Catalog(std::unique_ptr<rocksdb::DB> db, Options options)
    : db_(std::move(db)), options_(options) {}

Catalog::~Catalog() = default;

absl::StatusOr<std::unique_ptr<Catalog>> Catalog::Open(const std::string& path, Options options) {
  rocksdb::Options db_options;
  db_options.create_if_missing = true;
  db_options.compression = rocksdb::kNoCompression;
  rocksdb::DB* raw = nullptr;
  rocksdb::Status opened = rocksdb::DB::Open(db_options, path, &raw);
  if (!opened.ok()) {
    return absl::UnavailableError(
        absl::StrCat("cannot open the catalog at ", path, ": ", opened.ToString()));
  }
  std::unique_ptr<Catalog> catalog(new Catalog(std::unique_ptr<rocksdb::DB>(raw), options));
  std::unique_ptr<rocksdb::Iterator> it(raw->NewIterator(rocksdb::ReadOptions()));
  MutexLock lock(&catalog->mu_);
  for (it->Seek(std::string(1, kDatasetPrefix)); it->Valid() && it->key()[0] == kDatasetPrefix;
       it->Next()) {
    v1::CatalogDataset record;
    if (!record.ParseFromArray(it->value().data(), static_cast<int>(it->value().size()))) {
      return absl::DataLossError(absl::StrCat("catalog at ", path, ": record of dataset '",
                                              it->key().ToString().substr(1), "' does not parse"));
    }
    catalog->Install(record, {});
  }
  GRANARY_RETURN_IF_ERROR(RocksStatus(it->status(), "reading datasets"));
  GRANARY_RETURN_IF_ERROR(catalog->DeleteUnnamedManifestsLocked());
  return catalog;
}

absl::Status Catalog::DeleteUnnamedManifestsLocked() {
  rocksdb::WriteBatch batch;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions()));
  for (it->Seek(std::string(1, kPendingPrefix));
       it->Valid() && it->key().starts_with(std::string_view(&kPendingPrefix, 1)); it->Next()) {
    const uint64_t version = ReadBigEndian(it->key().ToStringView().substr(1), 8);
    if (!version_owner_.contains(version)) {
      GRANARY_LOG(WARNING) << "catalog: deleting the manifest pages of version "
                           << FormatVersion(version)
                           << ", which no dataset names (a change cut short)";
      batch.DeleteRange(ManifestPrefix(version), PastManifestPages(version));
    }
    batch.Delete(it->key());
  }
  GRANARY_RETURN_IF_ERROR(RocksStatus(it->status(), "reading pending manifests"));
  if (batch.Count() == 0) return absl::OkStatus();
  rocksdb::WriteOptions options;
  options.sync = true;
  return RocksStatus(db_->Write(options, &batch), "deleting unnamed manifest pages");
}

void Catalog::Install(const v1::CatalogDataset& record,
                      const std::vector<uint64_t>& dropped_versions) {
  for (uint64_t version : dropped_versions) {
    version_owner_.erase(version);
    Forget(version);
    unloadable_.erase(version);
  }
  if (record.removed()) {
    datasets_.erase(record.name());
    tombstones_[record.name()] = record;
    return;
  }
  tombstones_.erase(record.name());
  for (const v1::CatalogVersion& version : record.versions()) {
    version_owner_[version.version()] = record.name();
  }
  datasets_[record.name()] = record;
}

absl::Status Catalog::WriteDataset(const v1::CatalogDataset& record,
                                   const std::vector<const Manifest*>& new_manifests,
                                   const std::vector<uint64_t>& dropped_versions) {
  rocksdb::WriteBatch batch;
  absl::Status pages_written;
  for (const Manifest* new_manifest : new_manifests) {
    // Goes out with the first pages and is deleted with the record: a crash
    // between them leaves it for Open() to find.
    batch.Put(PendingKey(new_manifest->version()), "");
    const ManifestEntries& entries = new_manifest->entries();
    uint32_t page_index = 0;
    for (size_t start = 0; start < entries.size() && pages_written.ok();
         start += kManifestPageEntries) {
      v1::ManifestPage page;
      size_t end = std::min(entries.size(), start + kManifestPageEntries);
      for (size_t i = start; i < end; ++i) entries[i].ToProto(page.add_entries());
      batch.Put(ManifestPageKey(new_manifest->version(), page_index++), page.SerializeAsString());
      if (batch.GetDataSize() >= options_.manifest_write_batch_bytes) {
        pages_written = RocksStatus(db_->Write(rocksdb::WriteOptions(), &batch),
                                    absl::StrCat("writing dataset '", record.name(), "'"));
        batch.Clear();
      }
    }
  }
  if (!pages_written.ok()) {
    // Pages the record will not name: deleted now if the disk lets us, else at the next Open().
    for (const Manifest* new_manifest : new_manifests) {
      batch.DeleteRange(ManifestPrefix(new_manifest->version()),
                        PastManifestPages(new_manifest->version()));
      batch.Delete(PendingKey(new_manifest->version()));
    }
    rocksdb::Status deleted = db_->Write(rocksdb::WriteOptions(), &batch);
    if (!deleted.ok()) {
      GRANARY_LOG(WARNING) << "catalog: pages of dataset '" << record.name()
                           << "' left for the next start to delete: " << deleted.ToString();
    }
    return pages_written;
  }
  for (const Manifest* new_manifest : new_manifests) {
    batch.Delete(PendingKey(new_manifest->version()));
  }
  for (uint64_t version : dropped_versions) {
    batch.DeleteRange(ManifestPrefix(version), PastManifestPages(version));
  }
  batch.Put(DatasetKey(record.name()), record.SerializeAsString());
  rocksdb::WriteOptions options;
  options.sync = true;
  return RocksStatus(db_->Write(options, &batch),
                     absl::StrCat("writing dataset '", record.name(), "'"));
}

absl::StatusOr<v1::CatalogDataset> Catalog::Create(std::shared_ptr<const Manifest> manifest,
                                                   uint32_t replicas, v1::FillPolicy fill,
                                                   int64_t now_unix_ms) {
  const DatasetIdentity& identity = manifest->identity();
  MutexLock lock(&mu_);
  if (datasets_.contains(identity.name)) {
    return absl::AlreadyExistsError(absl::StrCat("dataset '", identity.name, "' already exists"));
  }
  v1::CatalogDataset record;
  record.set_name(identity.name);
  record.set_source(identity.source);
  record.set_chunk_size(identity.chunk_size);
  record.set_replicas(replicas);
  record.set_fill(fill);
  // After a removal stamped by a clock ahead of ours, so the new dataset wins.
  auto tombstone = tombstones_.find(identity.name);
  record.set_updated_unix_ms(tombstone == tombstones_.end()
                                 ? now_unix_ms
                                 : std::max(now_unix_ms, tombstone->second.updated_unix_ms() + 1));
  *record.add_versions() = VersionRecord(*manifest, now_unix_ms);
  GRANARY_RETURN_IF_ERROR(WriteDataset(record, {manifest.get()}, {}));
  Install(record, {});
  Keep(std::move(manifest));
  return record;
}

absl::StatusOr<v1::CatalogDataset> Catalog::AddVersion(std::shared_ptr<const Manifest> manifest,
                                                       int64_t now_unix_ms) {
  const std::string& name = manifest->identity().name;
  MutexLock lock(&mu_);
  auto it = datasets_.find(name);
  if (it == datasets_.end()) {
    return absl::NotFoundError(absl::StrCat("dataset '", name, "' was removed"));
  }
  v1::CatalogDataset record = it->second;
  bool known = false;
  for (const v1::CatalogVersion& version : record.versions()) {
    known = known || version.version() == manifest->version();
  }
  if (record.versions().rbegin()->version() == manifest->version()) return record;
  record.set_updated_unix_ms(now_unix_ms);
  record.mutable_versions()->rbegin()->set_retired_unix_ms(now_unix_ms);
  if (known) {
    // The source went back to an older version's content: make it current again.
    auto* versions = record.mutable_versions();
    auto old = std::find_if(versions->begin(), versions->end(),
                            [&](const auto& v) { return v.version() == manifest->version(); });
    v1::CatalogVersion moved = *old;
    moved.clear_retired_unix_ms();
    versions->erase(old);
    *versions->Add() = moved;
    GRANARY_RETURN_IF_ERROR(WriteDataset(record, {}, {}));
  } else {
    *record.add_versions() = VersionRecord(*manifest, now_unix_ms);
    GRANARY_RETURN_IF_ERROR(WriteDataset(record, {manifest.get()}, {}));
  }
  Install(record, {});
  Keep(std::move(manifest));
  return record;
}

absl::StatusOr<v1::CatalogDataset> Catalog::Remove(std::string_view name, int64_t now_unix_ms) {
  MutexLock lock(&mu_);
  auto it = datasets_.find(AsAbsl(name));
  if (it == datasets_.end()) {
    return absl::NotFoundError(absl::StrCat("dataset '", AsAbsl(name), "' does not exist"));
  }
  v1::CatalogDataset removed = it->second;
  v1::CatalogDataset tombstone;
  tombstone.set_name(removed.name());
  tombstone.set_removed(true);
  tombstone.set_updated_unix_ms(std::max(now_unix_ms, removed.updated_unix_ms() + 1));
  std::vector<uint64_t> versions;
  for (const v1::CatalogVersion& version : removed.versions()) {
    versions.push_back(version.version());
  }
  GRANARY_RETURN_IF_ERROR(WriteDataset(tombstone, {}, versions));
  Install(tombstone, versions);
  return removed;
}

absl::StatusOr<std::vector<uint64_t>> Catalog::ReleaseVersions(
    std::string_view name, const std::vector<uint64_t>& versions) {
  MutexLock lock(&mu_);
  auto it = datasets_.find(AsAbsl(name));
  if (it == datasets_.end()) return std::vector<uint64_t>();
  v1::CatalogDataset record = it->second;
  const uint64_t current = CurrentVersion(record);
  std::vector<uint64_t> released;
  auto* held = record.mutable_versions();
  for (auto version = held->begin(); version != held->end();) {
    if (version->version() != current &&
        std::find(versions.begin(), versions.end(), version->version()) != versions.end()) {
      released.push_back(version->version());
      version = held->erase(version);
    } else {
      ++version;
    }
  }
  if (released.empty()) return released;
  GRANARY_RETURN_IF_ERROR(WriteDataset(record, {}, released));
  Install(record, released);
  return released;
}

std::vector<v1::CatalogDataset> Catalog::Records() const {
  std::vector<v1::CatalogDataset> all;
  {
    MutexLock lock(&mu_);
    for (const auto& [name, record] : datasets_) all.push_back(record);
    for (const auto& [name, record] : tombstones_) all.push_back(record);
  }
  std::sort(all.begin(), all.end(),
            [](const auto& a, const auto& b) { return a.name() < b.name(); });
  return all;
}

const v1::CatalogDataset* Catalog::Held(const std::string& name) const {
  for (const auto* records : {&datasets_, &tombstones_}) {
    if (auto it = records->find(name); it != records->end()) return &it->second;
  }
  return nullptr;
}

bool Catalog::NewerThanHeld(const v1::CatalogDataset& record) const {
  const v1::CatalogDataset* held = Held(record.name());
  // An unknown name: only a live record adds anything.
  return held != nullptr ? ChangedLater(record, *held) : !record.removed();
}

bool Catalog::IsNewer(const v1::CatalogDataset& record) const {
  MutexLock lock(&mu_);
  return NewerThanHeld(record);
}

bool Catalog::HasVersion(uint64_t version) const {
  MutexLock lock(&mu_);
  return version_owner_.contains(version);
}

absl::StatusOr<Catalog::Adopted> Catalog::Adopt(
    const v1::CatalogDataset& record,
    const std::vector<std::shared_ptr<const Manifest>>& manifests) {
  if (!record.removed() && record.versions().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("replicated record of dataset '", record.name(), "' has no version"));
  }
  MutexLock lock(&mu_);
  Adopted adopted;
  if (!NewerThanHeld(record)) return adopted;
  const v1::CatalogDataset* held = Held(record.name());

  std::vector<const Manifest*> new_manifests;
  for (const v1::CatalogVersion& version : record.versions()) {
    auto owner = version_owner_.find(version.version());
    if (owner != version_owner_.end()) {
      if (owner->second != record.name()) {
        return absl::FailedPreconditionError(
            absl::StrCat("version ", FormatVersion(version.version()), " of dataset '",
                         record.name(), "' belongs to dataset '", owner->second, "' here"));
      }
      continue;
    }
    auto given = std::find_if(manifests.begin(), manifests.end(), [&](const auto& manifest) {
      return manifest->version() == version.version();
    });
    if (given == manifests.end()) {
      return absl::FailedPreconditionError(
          absl::StrCat("the manifest of version ", FormatVersion(version.version()),
                       " of dataset '", record.name(), "' was not fetched"));
    }
    new_manifests.push_back(given->get());
  }
  if (held != nullptr) {
    for (const v1::CatalogVersion& version : held->versions()) {
      bool kept = std::any_of(record.versions().begin(), record.versions().end(),
                              [&](const auto& v) { return v.version() == version.version(); });
      if (!kept) adopted.dropped_versions.push_back(version.version());
    }
  }
  GRANARY_RETURN_IF_ERROR(WriteDataset(record, new_manifests, adopted.dropped_versions));
  Install(record, adopted.dropped_versions);
  adopted.changed = true;
  return adopted;
}

absl::StatusOr<v1::CatalogDataset> Catalog::Get(std::string_view name) const {
  MutexLock lock(&mu_);
  auto it = datasets_.find(AsAbsl(name));
  if (it == datasets_.end()) {
    return absl::NotFoundError(absl::StrCat("dataset '", AsAbsl(name), "' does not exist"));
  }
  return it->second;
}

absl::StatusOr<uint64_t> Catalog::CurrentVersionOf(std::string_view name) const {
  MutexLock lock(&mu_);
  auto it = datasets_.find(AsAbsl(name));
  if (it == datasets_.end() || it->second.versions().empty()) {
    return absl::NotFoundError(absl::StrCat("dataset '", AsAbsl(name), "' does not exist"));
  }
  return it->second.versions().rbegin()->version();
}

std::vector<v1::CatalogDataset> Catalog::List() const {
  std::vector<v1::CatalogDataset> all;
  {
    MutexLock lock(&mu_);
    for (const auto& [name, record] : datasets_) all.push_back(record);
  }
  std::sort(all.begin(), all.end(),
            [](const auto& a, const auto& b) { return a.name() < b.name(); });
  return all;
}

size_t Catalog::Size() const {
  MutexLock lock(&mu_);
  return datasets_.size();
}

absl::StatusOr<std::shared_ptr<const Manifest>> Catalog::GetManifest(uint64_t version) {
  v1::CatalogDataset record;
  {
    MutexLock lock(&mu_);
    if (auto kept = manifests_.find(version); kept != manifests_.end()) {
      uses_.splice(uses_.end(), uses_, kept->second.use);
      return kept->second.manifest;
    }
    auto owner = version_owner_.find(version);
    if (owner == version_owner_.end()) {
      return absl::NotFoundError(absl::StrCat("no dataset has version ", FormatVersion(version)));
    }
    record = datasets_.at(owner->second);
  }
  // Loading a large manifest takes a while; it happens outside the lock, and
  // two concurrent loads of one version both succeed with equal results.
  absl::StatusOr<std::shared_ptr<const Manifest>> manifest = LoadManifest(record, version);
  MutexLock lock(&mu_);
  manifest_loads_++;
  if (!version_owner_.contains(version)) {
    return absl::NotFoundError(
        absl::StrCat("dataset '", record.name(), "' was removed while being read"));
  }
  if (!manifest.ok()) {
    v1::UnloadableDataset& unloadable = unloadable_[version];
    unloadable.set_name(record.name());
    unloadable.set_version(version);
    unloadable.set_error(std::string(manifest.status().message()));
    return manifest.status();
  }
  unloadable_.erase(version);
  return Keep(*std::move(manifest));
}

std::shared_ptr<const Manifest> Catalog::Keep(std::shared_ptr<const Manifest> manifest) {
  auto [kept, added] = manifests_.try_emplace(manifest->version());
  if (added) {
    kept->second.use = uses_.insert(uses_.end(), manifest->version());
    manifest_bytes_ += manifest->memory_bytes();
    kept->second.manifest = std::move(manifest);
  } else {
    uses_.splice(uses_.end(), uses_, kept->second.use);
  }
  std::shared_ptr<const Manifest> result = kept->second.manifest;
  // From the least recently used up to the one just kept, which stays. Only
  // this catalog hands out copies, under mu_, so one that nothing else holds
  // now cannot be taken while it is dropped.
  for (auto use = uses_.begin();
       manifest_bytes_ > options_.manifest_memory_bytes && use != std::prev(uses_.end());) {
    const uint64_t version = *use++;
    if (manifests_.at(version).manifest.use_count() == 1) Forget(version);
  }
  return result;
}

void Catalog::Forget(uint64_t version) {
  auto kept = manifests_.find(version);
  if (kept == manifests_.end()) return;
  manifest_bytes_ -= kept->second.manifest->memory_bytes();
  uses_.erase(kept->second.use);
  manifests_.erase(kept);
}

Catalog::MemoryUse Catalog::ManifestMemory() const {
  MutexLock lock(&mu_);
  return {.bytes = manifest_bytes_, .manifests = manifests_.size(), .loads = manifest_loads_};
}

std::vector<v1::UnloadableDataset> Catalog::Unloadable() const {
  MutexLock lock(&mu_);
  std::vector<v1::UnloadableDataset> out;
  for (const auto& [version, unloadable] : unloadable_) out.push_back(unloadable);
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return std::pair(a.name(), a.version()) < std::pair(b.name(), b.version());
  });
  return out;
}

absl::StatusOr<std::shared_ptr<const Manifest>> Catalog::LoadManifest(
    const v1::CatalogDataset& record, uint64_t version) {
  ManifestEntries entries;
  for (const v1::CatalogVersion& held : record.versions()) {
    if (held.version() == version) entries.reserve(held.entry_count());
  }
  std::string prefix = ManifestPrefix(version);
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions()));
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    v1::ManifestPage page;
    if (!page.ParseFromArray(it->value().data(), static_cast<int>(it->value().size()))) {
      return absl::DataLossError(
          absl::StrCat("catalog: a manifest page of dataset '", record.name(), "' does not parse"));
    }
    for (v1::ManifestEntry& proto : *page.mutable_entries()) {
      GRANARY_ASSIGN_OR_RETURN(ManifestEntry entry, ManifestEntry::FromProto(std::move(proto)));
      entries.push_back(std::move(entry));
    }
  }
  GRANARY_RETURN_IF_ERROR(RocksStatus(it->status(), "reading a manifest"));
  GRANARY_ASSIGN_OR_RETURN(
      Manifest manifest,
      Manifest::Build({record.name(), record.source(), record.chunk_size()}, std::move(entries)));
  if (manifest.version() != version) {
    return absl::DataLossError(absl::StrCat(
        "catalog: the manifest of dataset '", record.name(), "' version ", FormatVersion(version),
        " is damaged (it hashes to ", FormatVersion(manifest.version()), ")"));
  }
  return std::make_shared<const Manifest>(std::move(manifest));
}

}  // namespace granary
