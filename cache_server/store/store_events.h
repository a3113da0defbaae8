// StoreEvents is told what a ChunkStore comes to hold and what it stops
// holding, as it happens: an account of the cache's contents over time for
// whoever needs to know why a byte was or was not served from it (granaryd's
// source journal, read_path/source_journal.h).
//
// Contract: Kept() is called once the index holds the bytes (a reader may be
// served them from then on); Withdrawn() once any chunk of the file may no
// longer be held (evicted, dropped for a block that did not verify, its
// version removed, or found unwritten on open). Both are called in the order
// the store's changes happen, with the store's lock held: an implementation
// must be quick and must not call the store.
//
// Thread-safety: implementations are called from any thread.
#ifndef GRANARY_CACHE_SERVER_STORE_STORE_EVENTS_H_
#define GRANARY_CACHE_SERVER_STORE_STORE_EVENTS_H_

#include <cstdint>

#include "common/dataset/chunk_key.h"

namespace granary::store {

class StoreEvents {
 public:
  virtual ~StoreEvents() = default;
  // Bytes [offset, offset + length) of chunk `key` are held from now on.
  virtual void Kept(const ChunkKey& key, uint64_t offset, uint64_t length) = 0;
  // Chunks of file `file_id` of `dataset_version` may no longer be held.
  virtual void Withdrawn(uint64_t dataset_version, uint64_t file_id) = 0;
};

}  // namespace granary::store

#endif  // GRANARY_CACHE_SERVER_STORE_STORE_EVENTS_H_
