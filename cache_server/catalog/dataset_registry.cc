#include "cache_server/catalog/dataset_registry.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/base/absl_compat.h"
#include "common/base/logging.h"
#include "common/base/printable.h"
#include "common/base/size.h"
#include "common/base/status.h"
#include "common/base/wall_clock.h"
#include "common/dataset/chunk_math.h"

namespace granary {
absl::Status ValidateDatasetName(std::string_view name) {
  bool ok = !name.empty() && name.size() <= 128 && name.front() != '.' && name.front() != '-';
  for (char c : name) {
    ok = ok &&
         (absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-');
  }
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("dataset name '", Printable(name),
                   "' is invalid: use 1-128 letters, digits, '.', '_' or '-', not starting "
                   "with '.' or '-'"));
}

uint32_t ReplicasOf(const v1::CatalogDataset& record) {
  return std::max<uint32_t>(1, record.replicas());
}

DatasetRegistry::DatasetRegistry(Catalog* catalog, store::ChunkStore* store,
                                 VersionActivity* activity, Sources* sources, Limits limits)
    : catalog_(catalog), store_(store), activity_(activity), sources_(sources), limits_(limits) {}

absl::StatusOr<Manifest> DatasetRegistry::Scan(std::string_view name, std::string_view source,
                                               uint32_t chunk_size) {
  absl::StatusOr<std::shared_ptr<const Source>> opened = sources_->OpenToScan(source);
  if (!opened.ok()) {
    return absl::Status(opened.status().code(),
                        absl::StrCat("dataset '", AsAbsl(name), "': ", opened.status().message()));
  }
  auto started = std::chrono::steady_clock::now();
  absl::StatusOr<ScannedTree> tree = (*opened)->Scan(limits_.max_dataset_entries);
  if (!tree.ok()) {
    return absl::Status(tree.status().code(),
                        absl::StrCat("dataset '", AsAbsl(name), "': ", tree.status().message()));
  }
  GRANARY_ASSIGN_OR_RETURN(Manifest manifest,
                           Manifest::Build({std::string(name), std::string(source), chunk_size},
                                           std::move(tree->entries), std::move(tree->skipped)));
  GRANARY_LOG(INFO)
      << "scanned " << source << " for dataset '" << name << "': " << manifest.file_count()
      << " files, " << manifest.directory_count() << " directories, "
      << FormatSize(manifest.total_bytes()) << ", " << manifest.skipped().count << " skipped, in "
      << std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count() << " s";
  return manifest;
}

absl::StatusOr<v1::DatasetInfo> DatasetRegistry::Add(std::string_view name, std::string_view source,
                                                     uint32_t chunk_size, uint32_t replicas,
                                                     v1::FillPolicy fill) {
  GRANARY_RETURN_IF_ERROR(ValidateDatasetName(name));
  if (!v1::FillPolicy_IsValid(fill)) {
    return absl::InvalidArgumentError(absl::StrCat("dataset '", AsAbsl(name), "': fill policy ",
                                                   fill, " is not one of on-read, none"));
  }
  if (replicas == 0) replicas = 1;
  if (replicas > kMaxReplicas) {
    return absl::InvalidArgumentError(absl::StrCat("dataset '", AsAbsl(name), "': ", replicas,
                                                   " replicas is over the maximum, ",
                                                   kMaxReplicas));
  }
  if (chunk_size == 0) chunk_size = kDefaultChunkSize;
  if (chunk_size < kMinChunkSize || chunk_size > kMaxChunkSize) {
    return absl::InvalidArgumentError(absl::StrCat("chunk size ", chunk_size,
                                                   " is outside 1 MiB - 64 MiB (", kMinChunkSize,
                                                   "-", kMaxChunkSize, " bytes)"));
  }
  // Fail fast on a taken name before a long scan; Create() checks again.
  if (catalog_->Get(name).ok()) {
    return absl::AlreadyExistsError(absl::StrCat("dataset '", AsAbsl(name), "' already exists"));
  }
  if (catalog_->Size() >= limits_.max_datasets) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the catalog holds ", catalog_->Size(),
                     " datasets, the most it may hold "
                     "(max_datasets); remove one or raise the limit"));
  }
  absl::StatusOr<std::string> canonical = sources_->Canonical(source);
  if (!canonical.ok()) {
    return absl::Status(
        canonical.status().code(),
        absl::StrCat("dataset '", AsAbsl(name), "': ", canonical.status().message()));
  }
  GRANARY_ASSIGN_OR_RETURN(Manifest manifest, Scan(name, *canonical, chunk_size));
  GRANARY_ASSIGN_OR_RETURN(v1::CatalogDataset record,
                           catalog_->Create(std::make_shared<const Manifest>(std::move(manifest)),
                                            replicas, fill, NowUnixMs()));
  return Describe(record);
}

absl::StatusOr<v1::DatasetInfo> DatasetRegistry::Refresh(std::string_view name) {
  GRANARY_RETURN_IF_ERROR(ValidateDatasetName(name));
  GRANARY_ASSIGN_OR_RETURN(v1::CatalogDataset record, catalog_->Get(name));
  GRANARY_ASSIGN_OR_RETURN(Manifest manifest, Scan(name, record.source(), record.chunk_size()));
  GRANARY_ASSIGN_OR_RETURN(
      record,
      catalog_->AddVersion(std::make_shared<const Manifest>(std::move(manifest)), NowUnixMs()));
  return Describe(record);
}

absl::StatusOr<uint64_t> DatasetRegistry::Remove(std::string_view name) {
  GRANARY_RETURN_IF_ERROR(ValidateDatasetName(name));
  GRANARY_ASSIGN_OR_RETURN(v1::CatalogDataset record, catalog_->Remove(name, NowUnixMs()));
  std::vector<uint64_t> versions;
  for (const v1::CatalogVersion& version : record.versions()) versions.push_back(version.version());
  return FreeVersions(name, versions);
}

absl::StatusOr<bool> DatasetRegistry::Adopt(
    const v1::CatalogDataset& record,
    const std::vector<std::shared_ptr<const Manifest>>& manifests) {
  if (!record.removed()) {
    GRANARY_RETURN_IF_ERROR(sources_->Check(record.source()));
    if (!catalog_->Get(record.name()).ok() && catalog_->Size() >= limits_.max_datasets) {
      return absl::ResourceExhaustedError(
          absl::StrCat("the catalog holds ", catalog_->Size(),
                       " datasets, the most it may hold (max_datasets)"));
    }
    for (const std::shared_ptr<const Manifest>& manifest : manifests) {
      if (manifest->entries().size() > limits_.max_dataset_entries) {
        return absl::ResourceExhaustedError(
            absl::StrCat("a version has ", manifest->entries().size(),
                         " entries, more than one dataset may have (max_dataset_entries, ",
                         limits_.max_dataset_entries, ")"));
      }
    }
  }
  GRANARY_ASSIGN_OR_RETURN(Catalog::Adopted adopted, catalog_->Adopt(record, manifests));
  FreeVersions(record.name(), adopted.dropped_versions);
  return adopted.changed;
}

size_t DatasetRegistry::ReleaseRetired(int64_t now_unix_ms, std::chrono::milliseconds grace,
                                       const std::function<bool(uint64_t)>& in_use) {
  size_t released = 0;
  for (const v1::CatalogDataset& record : catalog_->List()) {
    std::vector<uint64_t> unused;
    for (int i = 0; i + 1 < record.versions_size(); ++i) {
      const v1::CatalogVersion& version = record.versions(i);
      const int64_t retired =
          version.retired_unix_ms() != 0 ? version.retired_unix_ms() : record.updated_unix_ms();
      if (now_unix_ms - retired >= grace.count() && !in_use(version.version())) {
        unused.push_back(version.version());
      }
    }
    if (unused.empty()) continue;
    absl::StatusOr<std::vector<uint64_t>> dropped =
        catalog_->ReleaseVersions(record.name(), unused);
    if (!dropped.ok()) {
      GRANARY_LOG(WARNING) << "dataset '" << record.name()
                           << "': releasing older versions failed: " << dropped.status();
      continue;
    }
    uint64_t freed = FreeVersions(record.name(), *dropped);
    for (uint64_t version : *dropped) {
      GRANARY_LOG(INFO) << "released version " << FormatVersion(version) << " of dataset '"
                        << record.name() << "': refreshed away, and unused on this node for "
                        << grace.count() / 1000 << " s";
    }
    if (!dropped->empty()) {
      GRANARY_LOG(INFO) << "dataset '" << record.name() << "': " << FormatSize(freed)
                        << " of released versions freed";
    }
    released += dropped->size();
  }
  return released;
}

uint64_t DatasetRegistry::FreeVersions(std::string_view name,
                                       const std::vector<uint64_t>& versions) {
  uint64_t freed = 0;
  for (uint64_t version : versions) {
    activity_->Forget(version);
    absl::StatusOr<uint64_t> dropped = store_->RemoveVersion(version);
    if (!dropped.ok()) {
      // The catalog no longer names the version, so its chunks are unreachable
      // and the store's eviction reclaims them.
      GRANARY_LOG(WARNING) << "dataset '" << name << "': dropping the chunks of version "
                           << FormatVersion(version) << " failed: " << dropped.status();
      continue;
    }
    freed += *dropped;
  }
  return freed;
}

absl::StatusOr<v1::DatasetInfo> DatasetRegistry::Get(std::string_view name) {
  GRANARY_RETURN_IF_ERROR(ValidateDatasetName(name));
  GRANARY_ASSIGN_OR_RETURN(v1::CatalogDataset record, catalog_->Get(name));
  return Describe(record);
}

std::vector<v1::DatasetInfo> DatasetRegistry::List() {
  std::vector<v1::DatasetInfo> infos;
  for (const v1::CatalogDataset& record : catalog_->List()) infos.push_back(Describe(record));
  return infos;
}

v1::DatasetInfo DatasetRegistry::Describe(const v1::CatalogDataset& record) {
  const v1::CatalogVersion& current = *record.versions().rbegin();
  v1::DatasetInfo info;
  info.set_name(record.name());
  info.set_source(record.source());
  info.set_version(current.version());
  info.set_chunk_size(record.chunk_size());
  info.set_replicas(ReplicasOf(record));
  info.set_fill(record.fill());
  info.set_file_count(current.file_count());
  info.set_directory_count(current.directory_count());
  info.set_total_bytes(current.total_bytes());
  info.set_chunk_count(current.chunk_count());
  info.set_created_unix_ms(current.created_unix_ms());
  *info.mutable_skipped() = current.skipped();
  info.set_skipped_count(current.skipped_count());
  info.set_owner_only_count(current.owner_only_count());
  for (int i = 0; i + 1 < record.versions_size(); ++i) {
    info.add_older_versions(record.versions(i).version());
  }
  info.set_cached_bytes(store_->CachedBytes(current.version()));
  return info;
}

}  // namespace granary
