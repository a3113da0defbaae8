#include "common/jobs/job_reads.h"

#include <algorithm>
#include <tuple>

#include "common/base/wall_clock.h"

namespace granary {
namespace {

uint64_t Load(std::atomic<uint64_t>& counter, bool take) {
  return take ? counter.exchange(0, std::memory_order_relaxed)
              : counter.load(std::memory_order_relaxed);
}

// Adds `values` to the repeated field `out`, growing it to `values`' size.
template <typename Values>
void AddEach(const Values& values, google::protobuf::RepeatedField<uint64_t>* out) {
  while (out->size() < static_cast<int>(values.size())) out->Add(0);
  for (size_t i = 0; i < static_cast<size_t>(values.size()); ++i) {
    out->Set(static_cast<int>(i), out->Get(static_cast<int>(i)) + values[i]);
  }
}

uint64_t TotalWait(const v1::JobReads& reads) {
  uint64_t total = reads.open_wait_ns();
  for (uint64_t wait : reads.wait_ns()) total += wait;
  return total;
}

bool Empty(const v1::JobReads& reads) {
  auto zero = [](const auto& field) {
    return std::all_of(field.begin(), field.end(), [](uint64_t value) { return value == 0; });
  };
  return reads.files_opened() == 0 && reads.open_wait_ns() == 0 && reads.errors() == 0 &&
         zero(reads.bytes()) && zero(reads.wait_ns()) && zero(reads.reads()) &&
         zero(reads.wait_buckets());
}

}  // namespace

void AddJobReads(const v1::JobReads& figures, v1::JobReads* total) {
  total->set_files_opened(total->files_opened() + figures.files_opened());
  total->set_open_wait_ns(total->open_wait_ns() + figures.open_wait_ns());
  total->set_errors(total->errors() + figures.errors());
  AddEach(figures.bytes(), total->mutable_bytes());
  AddEach(figures.wait_ns(), total->mutable_wait_ns());
  AddEach(figures.reads(), total->mutable_reads());
  AddEach(figures.wait_buckets(), total->mutable_wait_buckets());
  total->set_last_read_unix_ms(std::max(total->last_read_unix_ms(), figures.last_read_unix_ms()));
  total->set_first_read_unix_ms(
      EarliestKnown(total->first_read_unix_ms(), figures.first_read_unix_ms()));
  JoinReaders(figures.reader_uids(), total->mutable_reader_uids());
}

int64_t EarliestKnown(int64_t a_unix_ms, int64_t b_unix_ms) {
  if (a_unix_ms == 0) return b_unix_ms;
  if (b_unix_ms == 0) return a_unix_ms;
  return std::min(a_unix_ms, b_unix_ms);
}

void JoinReaders(const google::protobuf::RepeatedField<uint32_t>& readers,
                 google::protobuf::RepeatedField<uint32_t>* uids) {
  for (uint32_t uid : readers) {
    if (std::find(uids->begin(), uids->end(), uid) == uids->end()) uids->Add(uid);
  }
}

void JobReadCounters::NoteFirst(int64_t unix_ms) {
  int64_t first = first_active_ms_.load(std::memory_order_relaxed);
  while ((first == 0 || unix_ms < first) &&
         !first_active_ms_.compare_exchange_weak(first, unix_ms, std::memory_order_relaxed)) {
  }
}

void JobReadCounters::Touch() {
  const int64_t now = NowUnixMs();
  last_active_ms_.store(now, std::memory_order_relaxed);
  if (first_active_ms_.load(std::memory_order_relaxed) == 0) NoteFirst(now);
}

void JobReadCounters::Opened(int64_t wait_ns) {
  files_opened_.fetch_add(1, std::memory_order_relaxed);
  open_wait_ns_.fetch_add(static_cast<uint64_t>(std::max<int64_t>(wait_ns, 0)),
                          std::memory_order_relaxed);
  Touch();
}

void JobReadCounters::Read(ReadOrigin origin, uint64_t bytes, int64_t wait_ns) {
  const size_t index = static_cast<size_t>(origin);
  const uint64_t wait = static_cast<uint64_t>(std::max<int64_t>(wait_ns, 0));
  bytes_[index].fetch_add(bytes, std::memory_order_relaxed);
  wait_ns_[index].fetch_add(wait, std::memory_order_relaxed);
  reads_[index].fetch_add(1, std::memory_order_relaxed);
  const double seconds = static_cast<double>(wait) * 1e-9;
  const size_t bucket = static_cast<size_t>(
      std::lower_bound(kWaitBounds.begin(), kWaitBounds.end(), seconds) - kWaitBounds.begin());
  wait_buckets_[bucket].fetch_add(1, std::memory_order_relaxed);
  Touch();
}

void JobReadCounters::Failed() {
  errors_.fetch_add(1, std::memory_order_relaxed);
  Touch();
}

void JobReadCounters::AddTo(v1::JobReads* out, bool take) {
  out->set_files_opened(out->files_opened() + Load(files_opened_, take));
  out->set_open_wait_ns(out->open_wait_ns() + Load(open_wait_ns_, take));
  out->set_errors(out->errors() + Load(errors_, take));
  std::array<uint64_t, kReadOrigins> bytes, wait, reads;
  for (int i = 0; i < kReadOrigins; ++i) {
    bytes[i] = Load(bytes_[i], take);
    wait[i] = Load(wait_ns_[i], take);
    reads[i] = Load(reads_[i], take);
  }
  AddEach(bytes, out->mutable_bytes());
  AddEach(wait, out->mutable_wait_ns());
  AddEach(reads, out->mutable_reads());
  std::array<uint64_t, kWaitBounds.size() + 1> buckets;
  for (size_t i = 0; i < buckets.size(); ++i) buckets[i] = Load(wait_buckets_[i], take);
  AddEach(buckets, out->mutable_wait_buckets());
  out->set_last_read_unix_ms(std::max(out->last_read_unix_ms(), last_active_unix_ms()));
  out->set_first_read_unix_ms(
      EarliestKnown(out->first_read_unix_ms(), first_active_ms_.load(std::memory_order_relaxed)));
}

void JobReadCounters::Merge(const v1::JobReads& figures) {
  files_opened_.fetch_add(figures.files_opened(), std::memory_order_relaxed);
  open_wait_ns_.fetch_add(figures.open_wait_ns(), std::memory_order_relaxed);
  errors_.fetch_add(figures.errors(), std::memory_order_relaxed);
  // Figures beyond the origins and buckets this build knows are dropped.
  for (int i = 0; i < std::min(figures.bytes_size(), kReadOrigins); ++i) {
    bytes_[i].fetch_add(figures.bytes(i), std::memory_order_relaxed);
  }
  for (int i = 0; i < std::min(figures.wait_ns_size(), kReadOrigins); ++i) {
    wait_ns_[i].fetch_add(figures.wait_ns(i), std::memory_order_relaxed);
  }
  for (int i = 0; i < std::min(figures.reads_size(), kReadOrigins); ++i) {
    reads_[i].fetch_add(figures.reads(i), std::memory_order_relaxed);
  }
  const int buckets = static_cast<int>(wait_buckets_.size());
  for (int i = 0; i < std::min(figures.wait_buckets_size(), buckets); ++i) {
    wait_buckets_[i].fetch_add(figures.wait_buckets(i), std::memory_order_relaxed);
  }
  if (figures.first_read_unix_ms() > 0) NoteFirst(figures.first_read_unix_ms());
  Touch();
}

void JobLedger::AddReader(uint32_t uid, Entry* entry) {
  if (entry->readers.size() >= kMaxReaders) return;
  if (std::find(entry->readers.begin(), entry->readers.end(), uid) == entry->readers.end()) {
    entry->readers.push_back(uid);
  }
}

JobLedger::Entry& JobLedger::FindOrAddLocked(Key key) {
  auto it = entries_.find(key);
  if (it != entries_.end()) return it->second;
  if (entries_.size() >= limits_.max_entries) FoldOldestLocked();
  return entries_.emplace(std::move(key), Entry{std::make_shared<JobReadCounters>(), {}})
      .first->second;
}

std::shared_ptr<JobReadCounters> JobLedger::For(std::string_view job, std::string_view dataset,
                                                uint64_t version, std::optional<uint32_t> reader) {
  MutexLock lock(&mutex_);
  Entry& entry = FindOrAddLocked(Key{std::string(job), std::string(dataset), version});
  if (reader) AddReader(*reader, &entry);
  return entry.counters;
}

void JobLedger::FoldLocked(Entries::iterator it) {
  v1::JobReads totals;
  it->second.counters->AddTo(&totals, /*take=*/false);
  other_.Merge(totals);
  ++folded_;
  entries_.erase(it);
}

void JobLedger::FoldOldestLocked() {
  auto oldest = entries_.end();
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->second.counters.use_count() > 1) continue;
    if (oldest == entries_.end() || it->second.counters->last_active_unix_ms() <
                                        oldest->second.counters->last_active_unix_ms()) {
      oldest = it;
    }
  }
  if (oldest != entries_.end()) FoldLocked(oldest);
}

void JobLedger::FoldIdleLocked(int64_t idle_before_ms) {
  for (auto it = entries_.begin(); it != entries_.end();) {
    auto next = std::next(it);
    const JobReadCounters& counters = *it->second.counters;
    if (it->second.counters.use_count() == 1 && counters.last_active_unix_ms() < idle_before_ms) {
      FoldLocked(it);
    }
    it = next;
  }
}

v1::JobReadsReport JobLedger::TakeReport() {
  const int64_t idle_before = NowUnixMs() - limits_.idle_after.count();
  v1::JobReadsReport report;
  MutexLock lock(&mutex_);
  for (auto it = entries_.begin(); it != entries_.end();) {
    auto next = std::next(it);
    const auto& [job, dataset, version] = it->first;
    v1::JobReads delta;
    it->second.counters->AddTo(&delta, /*take=*/true);
    if (!Empty(delta)) {
      delta.set_job(job);
      delta.set_dataset(dataset);
      delta.set_version(version);
      delta.mutable_reader_uids()->Add(it->second.readers.begin(), it->second.readers.end());
      *report.add_jobs() = std::move(delta);
    } else if (it->second.counters.use_count() == 1 &&
               it->second.counters->last_active_unix_ms() < idle_before) {
      entries_.erase(it);
    }
    it = next;
  }
  v1::JobReads folded;
  other_.AddTo(&folded, /*take=*/true);
  if (!Empty(folded)) {
    folded.set_job(std::string(kOtherJob));
    *report.add_jobs() = std::move(folded);
  }
  return report;
}

void JobLedger::Merge(const v1::JobReadsReport& report) {
  for (const v1::JobReads& reads : report.jobs()) {
    if (reads.job() == kOtherJob) {
      other_.Merge(reads);
      continue;
    }
    std::shared_ptr<JobReadCounters> counters;
    {
      MutexLock lock(&mutex_);
      Entry& entry = FindOrAddLocked(Key{reads.job(), reads.dataset(), reads.version()});
      for (uint32_t uid : reads.reader_uids()) AddReader(uid, &entry);
      counters = entry.counters;
    }
    counters->Merge(reads);
  }
}

JobLedger::Listing JobLedger::Totals() {
  Listing listing;
  {
    MutexLock lock(&mutex_);
    FoldIdleLocked(NowUnixMs() - limits_.idle_after.count());
    absl::flat_hash_map<std::pair<std::string_view, std::string_view>, size_t> rows;
    for (const auto& [key, entry] : entries_) {
      const auto& [job, dataset, version] = key;
      auto [row, added] = rows.try_emplace(
          std::pair<std::string_view, std::string_view>(job, dataset), listing.jobs.size());
      if (added) {
        v1::JobReads& totals = listing.jobs.emplace_back();
        totals.set_job(job);
        totals.set_dataset(dataset);
      }
      entry.counters->AddTo(&listing.jobs[row->second], /*take=*/false);
    }
    listing.folded_jobs = folded_;
  }
  std::sort(listing.jobs.begin(), listing.jobs.end(),
            [](const v1::JobReads& a, const v1::JobReads& b) {
              const uint64_t wait_a = TotalWait(a), wait_b = TotalWait(b);
              if (wait_a != wait_b) return wait_a > wait_b;
              return std::tie(a.job(), a.dataset()) < std::tie(b.job(), b.dataset());
            });
  v1::JobReads folded;
  other_.AddTo(&folded, /*take=*/false);
  if (!Empty(folded)) {
    folded.set_job(std::string(kOtherJob));
    listing.jobs.push_back(std::move(folded));
  }
  return listing;
}

std::vector<v1::JobReads> JobLedger::TakeJob(std::string_view job) {
  std::vector<v1::JobReads> taken;
  {
    MutexLock lock(&mutex_);
    for (auto it = entries_.begin(); it != entries_.end();) {
      auto next = std::next(it);
      const auto& [entry_job, dataset, version] = it->first;
      if (entry_job == job) {
        v1::JobReads& reads = taken.emplace_back();
        reads.set_dataset(dataset);
        reads.set_version(version);
        reads.mutable_reader_uids()->Add(it->second.readers.begin(), it->second.readers.end());
        it->second.counters->AddTo(&reads, /*take=*/true);
        if (it->second.counters.use_count() == 1) entries_.erase(it);
      }
      it = next;
    }
  }
  std::erase_if(taken, Empty);
  std::sort(taken.begin(), taken.end(), [](const v1::JobReads& a, const v1::JobReads& b) {
    if (a.dataset() != b.dataset()) return a.dataset() < b.dataset();
    return a.version() < b.version();
  });
  return taken;
}

size_t JobLedger::entries() const {
  MutexLock lock(&mutex_);
  return entries_.size();
}

}  // namespace granary
