// BatchReads answers the batches of whole files asked for on the local read
// socket (v1::BatchRequest, client/batch_reader.h): for each path of one
// dataset version, a read-only descriptor of the cache's copy of the file,
// byte for byte the source file and verified before it is handed out
// (ReadThrough::OpenWholeFile), so that a reader reads a batch of small files
// with one request and no kernel round trip per file.
//
// Every file is judged alone (AllowFileRead with the caller's SO_PEERCRED
// uid and groups): a file the caller may not read, a path that is not a
// regular file of the version, or a fetch that failed is refused with its
// own code and message, and the rest of the batch is served. Errors of the
// whole batch: INVALID_ARGUMENT for more than kMaxBatchFiles paths or no
// dataset name, NOT_FOUND for an unknown dataset or a version that is not
// the dataset's.
//
// Files the node lacks are fetched (read_through) before the answer: those of
// one chunk owned by another node of the group with one exchange per owner
// for the whole batch (ReadThrough::FetchFromOwners), the rest one by one.
//
// Bounds, whatever the caller sends: at most kMaxBatchFiles descriptors per
// answer; files fetched one by one take at most kMaxFetchThreads threads,
// and only files up to kMaxReadThroughFileBytes are fetched
// (larger ones are FAILED_PRECONDITION: a reader reads them by ranges over
// gRPC); a file the store would not take (full of active data) is answered
// from memory, a sealed copy, for at most kMaxInMemoryBytes per batch, and
// otherwise UNAVAILABLE.
//
// Thread-safety: Answer() may be called concurrently.
#ifndef GRANARY_CACHE_SERVER_READ_PATH_BATCH_READS_H_
#define GRANARY_CACHE_SERVER_READ_PATH_BATCH_READS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "cache_server/access/access_policy.h"
#include "cache_server/access/caller.h"
#include "cache_server/catalog/catalog.h"
#include "cache_server/read_path/read_through.h"
#include "common/base/unique_fd.h"
#include "proto/granary.pb.h"

namespace granary {

class BatchReads {
 public:
  static constexpr size_t kMaxFetchThreads = 8;
  static constexpr uint64_t kMaxReadThroughFileBytes = 64ull << 20;
  static constexpr uint64_t kMaxInMemoryBytes = 64ull << 20;

  // All three must outlive this.
  BatchReads(Catalog* catalog, const AccessPolicy* policy, ReadThrough* reads)
      : catalog_(catalog), policy_(policy), reads_(reads) {}

  // Fills `answer` for `request` made by `caller`, and `*passed` with the
  // descriptors to attach, in the order of the files they belong to.
  absl::Status Answer(const Caller& caller, const v1::BatchRequest& request,
                      v1::BatchAnswer* answer, std::vector<UniqueFd>* passed);

 private:
  Catalog* const catalog_;
  const AccessPolicy* const policy_;
  ReadThrough* const reads_;
};

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_READ_PATH_BATCH_READS_H_
