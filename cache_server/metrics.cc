#include "cache_server/metrics.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace granary {
namespace {

// Values are integers: printed in full, never in exponent notation.
void AppendMetric(std::string* out, absl::string_view name, const char* type,
                  absl::string_view help, const std::string& value) {
  absl::StrAppend(out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n", name, " ",
                  value, "\n");
}

void Counter(std::string* out, absl::string_view name, absl::string_view help, uint64_t value) {
  AppendMetric(out, name, "counter", help, absl::StrCat(value));
}

void Gauge(std::string* out, absl::string_view name, absl::string_view help, int64_t value) {
  AppendMetric(out, name, "gauge", help, absl::StrCat(value));
}

// granary_<kind>_*: what the running and finished jobs of one kind did.
void RenderPrewarm(absl::string_view kind, absl::string_view jobs, const PrewarmMetrics& metrics,
                   std::string* out) {
  const std::string prefix = absl::StrCat("granary_", kind, "_");
  std::string running_help = absl::StrCat(jobs, " in progress.");
  running_help[0] = absl::ascii_toupper(running_help[0]);
  Gauge(out, prefix + "running", running_help, metrics.running.load());
  Counter(out, prefix + "chunks_fetched_total", absl::StrCat("Chunks fetched by ", jobs, "."),
          metrics.chunks_fetched.load());
  Counter(out, prefix + "bytes_fetched_total", absl::StrCat("Bytes fetched by ", jobs, "."),
          metrics.bytes_fetched.load());
  Counter(out, prefix + "chunks_skipped_total",
          absl::StrCat("Chunks ", jobs, " found already cached."), metrics.chunks_skipped.load());
  Gauge(out, prefix + "bytes_remaining",
        absl::StrCat("Bytes the running ", jobs, " still have to do."),
        metrics.bytes_remaining.load());
}

}  // namespace

void LatencyHistogram::Observe(double seconds) {
  size_t bucket = 0;
  while (bucket < kBounds.size() && seconds > kBounds[bucket]) ++bucket;
  buckets_[bucket].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  sum_nanos_.fetch_add(static_cast<uint64_t>(seconds * 1e9), std::memory_order_relaxed);
}

void LatencyHistogram::Render(const char* name, const char* help, std::string* out) const {
  absl::StrAppend(out, "# HELP ", name, " ", help, "\n# TYPE ", name, " histogram\n");
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= kBounds.size(); ++i) {
    cumulative += buckets_[i].load(std::memory_order_relaxed);
    std::string bound = i < kBounds.size() ? absl::StrCat(kBounds[i]) : "+Inf";
    absl::StrAppend(out, name, "_bucket{le=\"", bound, "\"} ", cumulative, "\n");
  }
  absl::StrAppend(out, name, "_sum ", sum_nanos_.load(std::memory_order_relaxed) / 1e9, "\n", name,
                  "_count ", count_.load(std::memory_order_relaxed), "\n");
}

std::string ServerMetrics::Render(const store::StoreStats& store, uint64_t dataset_count,
                                  const Catalog::MemoryUse& manifests,
                                  const HoldTotals& holds) const {
  std::string out;
  Counter(&out, "granary_cache_hits_total", "Chunk reads answered from the local store.",
          hits.load());
  Counter(&out, "granary_cache_misses_total", "Chunk reads that needed a source fetch.",
          misses.load());
  Counter(&out, "granary_bytes_from_cache_total", "Bytes of chunk reads answered from the store.",
          bytes_from_cache.load());
  Counter(&out, "granary_bytes_from_source_total", "Bytes fetched from dataset sources.",
          bytes_from_source.load());
  Counter(&out, "granary_source_reads_total", "Whole-chunk fetches from dataset sources.",
          source_reads.load());
  Counter(&out, "granary_source_errors_total", "Source fetches that failed.", source_errors.load());
  Counter(&out, "granary_fill_source_waits_total",
          "Fill and prewarm source reads that waited for readers' source reads.",
          fill_source_waits.load());
  Counter(&out, "granary_peer_copies_total", "Misses copied from a peer's cache.",
          peer_copies.load());
  Counter(&out, "granary_bytes_from_peers_total", "Bytes copied from peers' caches.",
          bytes_from_peers.load());
  Counter(&out, "granary_peer_copy_errors_total", "Copies a peer failed to answer.",
          peer_copy_errors.load());
  Counter(&out, "granary_read_errors_total", "ReadChunk calls answered with an error.",
          read_errors.load());
  read_latency.Render("granary_read_latency_seconds",
                      "Time to obtain a chunk for ReadChunk, hit or miss.", &out);
  RenderPrewarm("prewarm", "prewarms", prewarm, &out);
  RenderPrewarm("fill", "fills", fill, &out);
  Gauge(&out, "granary_write_behind_bytes", "Fetched chunk bytes waiting to be stored.",
        write_behind_bytes.load());
  Counter(&out, "granary_write_behind_dropped_total",
          "Fetched chunks served but not stored: the write-behind queue was full.",
          write_behind_dropped.load());
  Gauge(&out, "granary_store_capacity_bytes", "Configured store capacity.",
        static_cast<int64_t>(store.capacity_bytes));
  Gauge(&out, "granary_store_used_bytes", "Bytes of live chunks in the store.",
        static_cast<int64_t>(store.used_bytes));
  Gauge(&out, "granary_store_disk_bytes", "Blocks of data files on disk.",
        static_cast<int64_t>(store.disk_bytes));
  Gauge(&out, "granary_store_chunks", "Chunks in the store.",
        static_cast<int64_t>(store.chunk_count));
  Counter(&out, "granary_store_checksum_failures_total",
          "Stored chunks dropped because their XXH3 did not verify.", store.checksum_failures);
  Counter(&out, "granary_store_evicted_chunks_total", "Chunks evicted to make room.",
          store.evicted_chunks);
  Counter(&out, "granary_store_admissions_refused_total", "Chunks the store declined to admit.",
          store.admissions_refused);
  Counter(&out, "granary_store_insert_errors_total",
          "Chunks the store failed to write (a full disk, an I/O error); they were served "
          "uncached.",
          store.insert_errors);
  Counter(&out, "granary_store_whole_files_total",
          "Files handed to granary-fuse whole and verified, for the kernel to serve.",
          store.whole_files);
  Counter(&out, "granary_store_whole_files_ahead_total",
          "Files handed to granary-fuse whole and verified ahead of their opens.",
          store.whole_files_ahead);
  Gauge(&out, "granary_datasets", "Registered datasets.", static_cast<int64_t>(dataset_count));
  Gauge(&out, "granary_manifest_memory_bytes", "Memory taken by the manifests kept in memory.",
        static_cast<int64_t>(manifests.bytes));
  Gauge(&out, "granary_manifests_in_memory", "Dataset versions whose manifest is in memory.",
        static_cast<int64_t>(manifests.manifests));
  Counter(&out, "granary_manifest_loads_total", "Manifests loaded from the catalog on disk.",
          manifests.loads);
  Gauge(&out, "granary_hold_share_bytes", "The share of the capacity holds may take (hold_share).",
        static_cast<int64_t>(holds.share_bytes));
  Gauge(&out, "granary_hold_held_bytes",
        "Bytes of the dataset versions held for jobs, each version counted once.",
        static_cast<int64_t>(holds.held_bytes));
  Gauge(&out, "granary_holds", "Dataset versions held for jobs, once per holder.",
        static_cast<int64_t>(holds.holds));
  return out;
}

}  // namespace granary
