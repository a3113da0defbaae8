// DatasetRegistry implements the dataset operations of the API on top of the
// catalog: registering a name for a source (scan, build the manifest, record
// it), refreshing (a new version when the source changed; the older one
// stays readable until it is released), releasing older versions nothing
// uses any more, removing (catalog records and cached chunks), and
// describing datasets as v1::DatasetInfo with this node's cached bytes.
//
// Sources are confined to the configured source roots and S3 endpoints
// (Sources), both when this node registers or refreshes a dataset and when
// it adopts a peer's record; and the catalog's size and each version's entries are bounded
// (Limits), so that no caller can exhaust the node's memory.
//
// Errors name what was wrong: INVALID_ARGUMENT for a bad name, source or chunk
// size; ALREADY_EXISTS for a taken name; NOT_FOUND for an unknown dataset or a
// missing source; PERMISSION_DENIED for an unreadable source or one outside
// the source roots; RESOURCE_EXHAUSTED past a limit.
//
// Thread-safety: all methods are safe to call concurrently; concurrent
// registrations of one name leave exactly one.
#ifndef GRANARY_CACHE_SERVER_CATALOG_DATASET_REGISTRY_H_
#define GRANARY_CACHE_SERVER_CATALOG_DATASET_REGISTRY_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "cache_server/access/sources.h"
#include "cache_server/catalog/catalog.h"
#include "cache_server/catalog/version_activity.h"
#include "cache_server/store/chunk_store.h"
#include "proto/granary.pb.h"

namespace granary {

// INVALID_ARGUMENT naming the name unless it is 1-128 characters of
// [A-Za-z0-9._-] not starting with '.' or '-' (names become directory names
// under the mount).
absl::Status ValidateDatasetName(std::string_view name);

// Copies of a chunk one cache group may hold: beyond a few, a replica buys no
// availability and costs a group's NVMe.
inline constexpr uint32_t kMaxReplicas = 8;

// The copies of each chunk per cache group that `record` asks for.
uint32_t ReplicasOf(const v1::CatalogDataset& record);

class DatasetRegistry {
 public:
  struct Limits {
    size_t max_datasets = 1000;
    size_t max_dataset_entries = 5'000'000;
  };

  // `sources` must outlive the registry.
  DatasetRegistry(Catalog* catalog, store::ChunkStore* store, VersionActivity* activity,
                  Sources* sources, Limits limits);

  // `chunk_size` 0 means kDefaultChunkSize; `replicas` 0 means 1, and at
  // most kMaxReplicas; `fill` FILL_DEFAULT means each node's default.
  absl::StatusOr<v1::DatasetInfo> Add(std::string_view name, std::string_view source,
                                      uint32_t chunk_size, uint32_t replicas,
                                      v1::FillPolicy fill = v1::FILL_DEFAULT);
  absl::StatusOr<v1::DatasetInfo> Refresh(std::string_view name);
  // Returns the bytes freed on this node.
  absl::StatusOr<uint64_t> Remove(std::string_view name);
  // Takes a peer's record of a dataset if it is newer (Catalog::Adopt), and
  // frees the chunks of versions it drops. Returns whether anything changed.
  // A record whose source lies outside this node's source roots or S3
  // endpoints, or that would pass a limit, is refused (PERMISSION_DENIED,
  // RESOURCE_EXHAUSTED).
  absl::StatusOr<bool> Adopt(const v1::CatalogDataset& record,
                             const std::vector<std::shared_ptr<const Manifest>>& manifests);
  // Releases every older version retired at least `grace` ago (by its
  // record's retired_unix_ms, else updated_unix_ms, on `now_unix_ms`'s clock)
  // for which `in_use` is false: drops it from the catalog
  // (Catalog::ReleaseVersions) and frees its chunks. Returns how many were
  // released; a version the catalog cannot drop stays for the next call.
  size_t ReleaseRetired(int64_t now_unix_ms, std::chrono::milliseconds grace,
                        const std::function<bool(uint64_t)>& in_use);
  absl::StatusOr<v1::DatasetInfo> Get(std::string_view name);
  std::vector<v1::DatasetInfo> List();

 private:
  absl::StatusOr<Manifest> Scan(std::string_view name, std::string_view source,
                                uint32_t chunk_size);
  v1::DatasetInfo Describe(const v1::CatalogDataset& record);
  // Drops the chunks of `versions` of dataset `name`; returns the bytes freed.
  uint64_t FreeVersions(std::string_view name, const std::vector<uint64_t>& versions);

  Catalog* const catalog_;
  store::ChunkStore* const store_;
  VersionActivity* const activity_;
  Sources* const sources_;
  const Limits limits_;
};

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_CATALOG_DATASET_REGISTRY_H_
