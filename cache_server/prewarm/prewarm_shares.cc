#include "cache_server/prewarm/prewarm_shares.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/size.h"

namespace granary {

PrewarmShares::PrewarmShares(store::ChunkStore* store, uint64_t share_bytes, std::string share_text)
    : store_(store), share_bytes_(share_bytes), share_text_(std::move(share_text)) {}

void PrewarmShares::Settle(uid_t user) {
  MutexLock lock(&mu_);
  auto found = held_.find(user);
  if (found == held_.end()) return;
  Held& held = found->second;
  absl::erase_if(held.chunks, [&](const auto& chunk) {
    if (store_->Contains(chunk.first)) return false;
    held.bytes -= chunk.second;
    return true;
  });
  if (held.chunks.empty()) held_.erase(found);
}

absl::Status PrewarmShares::Reserve(uid_t user, const ChunkKey& key, uint64_t length) {
  MutexLock lock(&mu_);
  Held& held = held_[user];
  if (held.chunks.contains(key)) return absl::OkStatus();
  if (held.bytes + length > share_bytes_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("uid ", user, "'s prewarms hold ", FormatSize(held.bytes),
                     " of this node's cache, as much as one user's prewarms may (", share_text_,
                     "); the rest was not prewarmed, and is cached as it is read"));
  }
  held.bytes += length;
  held.chunks.emplace(key, length);
  return absl::OkStatus();
}

void PrewarmShares::Unreserve(uid_t user, const ChunkKey& key) {
  MutexLock lock(&mu_);
  auto found = held_.find(user);
  if (found == held_.end()) return;
  auto chunk = found->second.chunks.find(key);
  if (chunk == found->second.chunks.end()) return;
  found->second.bytes -= chunk->second;
  found->second.chunks.erase(chunk);
}

}  // namespace granary
