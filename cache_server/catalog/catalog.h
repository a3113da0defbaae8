// The Catalog is granaryd's durable record of datasets: for each name, its
// source, chunk size and versions (oldest first, the last current), and the
// manifest of every version, in RocksDB under <data-dir>/catalog.
//
// Layout: "d" + name -> v1::CatalogDataset; "m" + version (8 bytes, big-endian)
// + page (4 bytes) -> v1::ManifestPage holding up to kManifestPageEntries
// entries, in file-id order. A new version's pages are written first, in
// batches of at most `manifest_write_batch_bytes` (RocksDB holds a batch in
// memory whole, and again at a restart that replays it: one batch of a
// ten-million-entry manifest held half a gigabyte both times), and then the
// dataset's record, in a synced batch with whatever the change deletes. While
// no record names them, "p" + version marks them: a crash thus leaves all of
// a change, or marked pages, which Open() deletes (reading only the marks).
//
// Removing a dataset leaves a tombstone (a record with `removed` set and no
// versions), and every record carries the time it last changed, so that
// catalogs replicated across servers converge: between two records of one
// name, the later change wins (CatalogSync).
//
// Older versions are released one server at a time (ReleaseVersions): the
// record loses them but keeps its date, since a release is not a change
// between servers to decide. Records that differ only in versions released
// on one server and not yet on another are then equally new to CatalogSync,
// neither replaces the other, and each server releases the versions on its
// own schedule (DatasetRegistry::ReleaseRetired), which every server reaches
// from the same record: the catalogs converge. A later change (a refresh or
// a removal anywhere) wins as before, listing only what its server kept.
//
// Manifests in memory are shared, and kept in least-recently-used order
// within a budget of bytes (Manifest::memory_bytes()): one written here is
// kept at once, since mounts ask for a version right after it is
// registered, and any other is loaded on first use. After each one kept,
// the least recently used are dropped from memory (never from RocksDB)
// while the budget is exceeded, except the one just kept and those a caller
// still holds: dropping a held manifest would free nothing, and a second
// load would hold it twice. So the manifests in memory take at most the
// budget, plus what callers hold, plus the last one kept when it alone is
// over. A dropped manifest is loaded again when next asked for. A loaded
// manifest is rebuilt and its version checked against the record, so a
// damaged catalog is reported (DATA_LOSS) rather than served.
//
// Thread-safety: all methods are safe to call concurrently.
#ifndef GRANARY_CACHE_SERVER_CATALOG_CATALOG_H_
#define GRANARY_CACHE_SERVER_CATALOG_CATALOG_H_

#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "common/base/mutex.h"
#include "common/dataset/manifest.h"
#include "proto/granary.pb.h"

namespace rocksdb {
class DB;
}  // namespace rocksdb

namespace granary {

class Catalog {
 public:
  static constexpr size_t kManifestPageEntries = 4096;

  struct Options {
    // The budget of the manifests kept in memory, in bytes.
    uint64_t manifest_memory_bytes;
    // The most bytes of manifest pages written in one batch.
    uint64_t manifest_write_batch_bytes = 32 << 20;
  };

  // Opens or creates the catalog at `path`.
  static absl::StatusOr<std::unique_ptr<Catalog>> Open(const std::string& path, Options options);
  ~Catalog();
  Catalog(const Catalog&) = delete;
  Catalog& operator=(const Catalog&) = delete;

  // Records a new dataset whose first version is `manifest`, with `replicas`
  // copies of each chunk per cache group and fill policy `fill`.
  // ALREADY_EXISTS naming the dataset if the name is taken (a removed name
  // may be reused).
  absl::StatusOr<v1::CatalogDataset> Create(std::shared_ptr<const Manifest> manifest,
                                            uint32_t replicas, v1::FillPolicy fill,
                                            int64_t now_unix_ms);

  // Makes `manifest` the current version of its dataset (nothing changes when
  // it already is), retiring the current one at `now_unix_ms`. NOT_FOUND
  // naming the dataset if it was removed meanwhile.
  absl::StatusOr<v1::CatalogDataset> AddVersion(std::shared_ptr<const Manifest> manifest,
                                                int64_t now_unix_ms);

  // Deletes the dataset and all its manifests, leaving a tombstone; returns
  // what it was.
  absl::StatusOr<v1::CatalogDataset> Remove(std::string_view name, int64_t now_unix_ms);

  // Drops those of `versions` that are older versions of dataset `name`, with
  // their manifests, leaving the record's date as it was; returns the ones
  // dropped, whose chunks the caller may free. Never drops the current
  // version; an unknown name drops nothing.
  absl::StatusOr<std::vector<uint64_t>> ReleaseVersions(std::string_view name,
                                                        const std::vector<uint64_t>& versions);

  // Every record, tombstones included, by name: what a peer needs to compare.
  std::vector<v1::CatalogDataset> Records() const;

  // Whether `record` (from a peer) is newer than what this catalog holds
  // under its name, so that Adopt() would change something.
  bool IsNewer(const v1::CatalogDataset& record) const;

  // What Adopt() changed.
  struct Adopted {
    bool changed = false;
    std::vector<uint64_t> dropped_versions;  // Whose chunks the caller may free.
  };
  // Replaces this catalog's record of `record.name()` by `record` if it is
  // newer. `manifests` must hold every version of `record` this catalog does
  // not have yet (FAILED_PRECONDITION naming the version otherwise); versions
  // the new record no longer lists are dropped.
  absl::StatusOr<Adopted> Adopt(const v1::CatalogDataset& record,
                                const std::vector<std::shared_ptr<const Manifest>>& manifests);

  // Whether the manifest of `version` is stored here.
  bool HasVersion(uint64_t version) const;

  // NOT_FOUND naming the dataset if unknown.
  absl::StatusOr<v1::CatalogDataset> Get(std::string_view name) const;
  // The current version of dataset `name`, without copying its record;
  // NOT_FOUND naming the dataset if unknown.
  absl::StatusOr<uint64_t> CurrentVersionOf(std::string_view name) const;
  // Every dataset, by name.
  std::vector<v1::CatalogDataset> List() const;
  // How many datasets there are.
  size_t Size() const;

  // The manifest of `version` of any dataset, loaded if it is not in memory,
  // and now the most recently used. NOT_FOUND if no dataset has it;
  // DATA_LOSS if its pages are damaged, and the version is then named by
  // Unloadable() until it loads or is dropped.
  absl::StatusOr<std::shared_ptr<const Manifest>> GetManifest(uint64_t version);

  // The versions whose manifest failed to load, and why.
  std::vector<v1::UnloadableDataset> Unloadable() const;

  struct MemoryUse {
    uint64_t bytes = 0;      // Manifest::memory_bytes() of the manifests in memory.
    uint64_t manifests = 0;  // How many are in memory.
    uint64_t loads = 0;      // Manifests loaded from RocksDB since the catalog opened.
  };
  MemoryUse ManifestMemory() const;

 private:
  Catalog(std::unique_ptr<rocksdb::DB> db, Options options);
  absl::Status WriteDataset(const v1::CatalogDataset& record,
                            const std::vector<const Manifest*>& new_manifests,
                            const std::vector<uint64_t>& dropped_versions);
  // Deletes the marked pages of manifests that no record came to name.
  absl::Status DeleteUnnamedManifestsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The live record or tombstone of `name`, or null.
  const v1::CatalogDataset* Held(const std::string& name) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Whether `record` changed later than what is held under its name.
  bool NewerThanHeld(const v1::CatalogDataset& record) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Keeps the in-memory maps in step with a written record.
  void Install(const v1::CatalogDataset& record, const std::vector<uint64_t>& dropped_versions)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<std::shared_ptr<const Manifest>> LoadManifest(const v1::CatalogDataset& record,
                                                               uint64_t version);
  // Makes `manifest` (or the one of its version already in memory, which is
  // returned) the most recently used, and then keeps within the budget.
  std::shared_ptr<const Manifest> Keep(std::shared_ptr<const Manifest> manifest)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops the manifest of `version` from memory, if it is there.
  void Forget(uint64_t version) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::unique_ptr<rocksdb::DB> db_;
  const Options options_;
  mutable Mutex mu_;
  // Every live dataset and every tombstone by name, and which dataset each
  // version is of.
  absl::flat_hash_map<std::string, v1::CatalogDataset> datasets_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, v1::CatalogDataset> tombstones_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, std::string> version_owner_ ABSL_GUARDED_BY(mu_);
  // The manifests in memory, and their versions from least to most recently
  // used.
  struct Kept {
    std::shared_ptr<const Manifest> manifest;
    std::list<uint64_t>::iterator use;  // Its place in `uses_`.
  };
  absl::flat_hash_map<uint64_t, Kept> manifests_ ABSL_GUARDED_BY(mu_);
  std::list<uint64_t> uses_ ABSL_GUARDED_BY(mu_);
  uint64_t manifest_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t manifest_loads_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<uint64_t, v1::UnloadableDataset> unloadable_ ABSL_GUARDED_BY(mu_);
};

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_CATALOG_CATALOG_H_
