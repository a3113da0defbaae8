// ReadThrough answers "the bytes of chunk K" on one node: from the chunk store
// when it holds K (verified by the store), else by fetching the whole chunk
// from the dataset's source, storing it and returning it. Concurrent misses of
// one chunk share a single source read. Every read marks its dataset version
// active for the store's eviction.
//
// Keys are checked against their version's manifest first: an unknown version
// is NOT_FOUND, a file id or chunk index past the end is OUT_OF_RANGE, a key
// naming a directory or symlink is INVALID_ARGUMENT. Source errors keep their
// codes (FAILED_PRECONDITION for a file that changed since registration).
// Store failures never fail a read: the chunk is fetched from the source.
//
// Thread-safety: all methods are safe to call concurrently.
#ifndef GRANARY_CACHE_SERVER_READ_THROUGH_H_
#define GRANARY_CACHE_SERVER_READ_THROUGH_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "cache_server/catalog.h"
#include "cache_server/metrics.h"
#include "cache_server/single_flight.h"
#include "cache_server/store/chunk_store.h"
#include "cache_server/version_activity.h"
#include "common/chunk_key.h"
#include "common/manifest.h"

namespace granary {

class ReadThrough {
 public:
  using ChunkData = std::shared_ptr<const std::string>;
  struct Chunk {
    ChunkData data;
    bool from_cache = false;
  };

  ReadThrough(Catalog* catalog, store::ChunkStore* store, ServerMetrics* metrics,
              VersionActivity* activity);

  // The whole chunk `key`.
  absl::StatusOr<Chunk> Read(const ChunkKey& key);

  // Fetches chunk `key` of `manifest` from the source into the store, unless
  // the store holds it already. Counts as a source read, not as a chunk read.
  absl::StatusOr<ChunkData> Fetch(const Manifest& manifest, const ChunkKey& key);

 private:
  absl::StatusOr<ChunkData> FetchOnce(const Manifest& manifest, const ChunkKey& key);

  Catalog* const catalog_;
  store::ChunkStore* const store_;
  ServerMetrics* const metrics_;
  VersionActivity* const activity_;
  SingleFlight<ChunkKey, absl::StatusOr<ChunkData>> flights_;
};

// Checks that `key` names an existing chunk of a file of `manifest`, and
// returns that file's entry.
absl::StatusOr<const ManifestEntry*> ChunkEntry(const Manifest& manifest, const ChunkKey& key);

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_READ_THROUGH_H_
