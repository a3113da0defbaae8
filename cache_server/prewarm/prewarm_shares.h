// PrewarmShares keeps what each user's prewarms bring into this node's cache
// within that user's share of it, so that no user crowds the others' data
// out by prewarming: a chunk a user's prewarm fetches counts against the
// user's share for as long as the store holds it (chunks some reader had
// cached already are nobody's prewarm). Administrators' prewarms count
// against no share.
//
// Thread-safety: all methods may be called concurrently.
#ifndef GRANARY_CACHE_SERVER_PREWARM_PREWARM_SHARES_H_
#define GRANARY_CACHE_SERVER_PREWARM_PREWARM_SHARES_H_

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "cache_server/store/chunk_store.h"
#include "common/base/mutex.h"
#include "common/dataset/chunk_key.h"

namespace granary {

class PrewarmShares {
 public:
  // `share_bytes`: what one user's prewarms may hold in `store`;
  // `share_text` names the option and its value in messages.
  PrewarmShares(store::ChunkStore* store, uint64_t share_bytes, std::string share_text);

  // Forgets the chunks of `user` the store no longer holds; called as a
  // prewarm of `user` starts.
  void Settle(uid_t user);
  // Counts `key` (`length` bytes) against `user`'s share before it is
  // fetched; RESOURCE_EXHAUSTED naming the share when it would go over.
  absl::Status Reserve(uid_t user, const ChunkKey& key, uint64_t length);
  // Gives back a chunk reserved and then not fetched.
  void Unreserve(uid_t user, const ChunkKey& key);

 private:
  struct Held {
    uint64_t bytes = 0;
    absl::flat_hash_map<ChunkKey, uint64_t> chunks;  // Key -> length.
  };

  store::ChunkStore* const store_;
  const uint64_t share_bytes_;
  const std::string share_text_;
  Mutex mu_;
  absl::flat_hash_map<uid_t, Held> held_ ABSL_GUARDED_BY(mu_);
};

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_PREWARM_PREWARM_SHARES_H_
