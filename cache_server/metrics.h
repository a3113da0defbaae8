// ServerMetrics are granaryd's counters and the read-latency histogram, and
// their rendering as Prometheus text (exposition format 0.0.4). Store figures
// (usage, capacity, checksum failures), catalog figures (datasets, manifests
// in memory) and the node's holds are read from their owners when rendering.
//
// Metric names (the contract dashboards and tests rely on):
//   granary_cache_hits_total, granary_cache_misses_total       chunk reads
//   granary_bytes_from_cache_total, granary_bytes_from_source_total
//   granary_source_reads_total          whole-chunk fetches from sources
//   granary_source_errors_total         fetches that failed
//   granary_fill_source_waits_total     fill and prewarm source reads that
//                                       waited for readers' (source_turns.h)
//   granary_peer_copies_total, granary_bytes_from_peers_total
//                                       misses copied from a peer's cache
//   granary_peer_copy_errors_total      peers that failed to answer a copy
//   granary_read_errors_total           ReadChunk calls answered with an error
//   granary_read_latency_seconds        histogram of ReadChunk chunk lookups
//   granary_prewarm_running             prewarms in progress
//   granary_prewarm_chunks_fetched_total, granary_prewarm_bytes_fetched_total
//   granary_prewarm_chunks_skipped_total  already cached when prewarm came
//   granary_prewarm_bytes_remaining     of the prewarms in progress
//   granary_fill_running, granary_fill_chunks_fetched_total,
//   granary_fill_bytes_fetched_total, granary_fill_chunks_skipped_total,
//   granary_fill_bytes_remaining        the same for fills (prewarms that a
//                                       cold read started)
//   granary_write_behind_bytes          fetched chunks waiting to be stored
//   granary_write_behind_dropped_total  chunks served but not stored (queue full)
//   granary_store_capacity_bytes, granary_store_used_bytes,
//   granary_store_disk_bytes, granary_store_chunks,
//   granary_store_checksum_failures_total, granary_store_evicted_chunks_total,
//   granary_store_admissions_refused_total
//   granary_store_insert_errors_total   chunks the store failed to write
//   granary_datasets
//   granary_manifest_memory_bytes, granary_manifests_in_memory
//                                       manifests the catalog keeps in memory
//   granary_manifest_loads_total        manifests loaded from the catalog's RocksDB
//   granary_hold_share_bytes, granary_hold_held_bytes
//                                       the node's hold share and what holds take
//                                       of it (cache_server/holds/)
//   granary_holds                       dataset versions held, once per holder
//
// Thread-safety: all methods are safe to call concurrently.
#ifndef GRANARY_CACHE_SERVER_METRICS_H_
#define GRANARY_CACHE_SERVER_METRICS_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <string>

#include "cache_server/catalog/catalog.h"
#include "cache_server/store/chunk_store.h"

namespace granary {

// What the holds of jobs take on this node (cache_server/holds/hold_table.h).
struct HoldTotals {
  uint64_t share_bytes = 0;  // hold_share of the capacity.
  uint64_t held_bytes = 0;   // Each held version counted once.
  uint64_t holds = 0;        // Held versions, once per holder.
};

// A Prometheus histogram with fixed bucket bounds, in seconds.
class LatencyHistogram {
 public:
  static constexpr std::array<double, 14> kBounds = {
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5};

  void Observe(double seconds);
  void Render(const char* name, const char* help, std::string* out) const;

 private:
  std::array<std::atomic<uint64_t>, kBounds.size() + 1> buckets_{};  // Last: +Inf.
  std::atomic<uint64_t> count_{0};
  std::atomic<uint64_t> sum_nanos_{0};
};

// What prewarm jobs count: those asked for (prewarm) and those a cold read
// started (fill) apart.
struct PrewarmMetrics {
  std::atomic<int64_t> running{0};
  std::atomic<uint64_t> chunks_fetched{0};
  std::atomic<uint64_t> bytes_fetched{0};
  std::atomic<uint64_t> chunks_skipped{0};
  std::atomic<int64_t> bytes_remaining{0};
};

struct ServerMetrics {
  std::atomic<uint64_t> hits{0};
  std::atomic<uint64_t> misses{0};
  std::atomic<uint64_t> bytes_from_cache{0};
  std::atomic<uint64_t> bytes_from_source{0};
  std::atomic<uint64_t> source_reads{0};
  std::atomic<uint64_t> fill_source_waits{0};
  std::atomic<uint64_t> source_errors{0};
  std::atomic<uint64_t> peer_copies{0};
  std::atomic<uint64_t> bytes_from_peers{0};
  std::atomic<uint64_t> peer_copy_errors{0};
  std::atomic<uint64_t> read_errors{0};
  PrewarmMetrics prewarm;
  PrewarmMetrics fill;
  std::atomic<int64_t> write_behind_bytes{0};
  std::atomic<uint64_t> write_behind_dropped{0};
  LatencyHistogram read_latency;

  std::string Render(const store::StoreStats& store, uint64_t dataset_count,
                     const Catalog::MemoryUse& manifests, const HoldTotals& holds) const;
};

}  // namespace granary

#endif  // GRANARY_CACHE_SERVER_METRICS_H_
