#include "cache_server/status/job_receipts.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/base/absl_compat.h"
#include "common/base/file_util.h"
#include "common/base/logging.h"
#include "common/base/printable.h"
#include "common/base/status.h"
#include "common/base/unique_fd.h"
#include "common/base/wall_clock.h"
#include "common/jobs/job_identity.h"
#include "common/jobs/job_reads.h"
#include "common/reports/job_reads_json.h"
#include "common/reports/json_documents.h"

namespace granary {
namespace {

constexpr mode_t kReceiptMode = 0640;

absl::Status BadDirectory(std::string_view path, std::string_view problem) {
  return absl::FailedPreconditionError(
      absl::StrCat("receipt_dir '", Printable(path), "' ", AsAbsl(problem)));
}

absl::Status CheckDirectory(const std::string& path) {
  if (path.front() != '/') return BadDirectory(path, "is not an absolute path");
  struct stat info;
  if (::lstat(path.c_str(), &info) != 0) {
    if (errno != ENOENT) return ErrnoStatus(errno, absl::StrCat("receipt_dir ", Printable(path)));
    return CreatePrivateDirectory(path, "receipt_dir");
  }
  if (!S_ISDIR(info.st_mode)) return BadDirectory(path, "is not a directory");
  if ((info.st_mode & S_IWOTH) != 0) {
    return BadDirectory(path, "is writable by everyone, who could then replace receipts");
  }
  if ((info.st_mode & S_IWGRP) != 0) {
    return BadDirectory(path, "is writable by its group, who could then replace receipts");
  }
  if (::access(path.c_str(), W_OK | X_OK) != 0) {
    return BadDirectory(path, absl::StrCat("is not writable by granaryd (uid ", ::geteuid(), ")"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<JobReceipts>> JobReceipts::Open(Options options) {
  if (!options.directory.empty()) GRANARY_RETURN_IF_ERROR(CheckDirectory(options.directory));
  return std::unique_ptr<JobReceipts>(new JobReceipts(std::move(options)));
}

void JobReceipts::AddReads(const std::vector<v1::JobReads>& reads, v1::JobReceipt* receipt) {
  for (const v1::JobReads& figures : reads) {
    auto same = std::find_if(receipt->mutable_reads()->begin(), receipt->mutable_reads()->end(),
                             [&](const v1::JobReads& kept) {
                               return kept.dataset() == figures.dataset() &&
                                      kept.version() == figures.version();
                             });
    v1::JobReads* total;
    if (same != receipt->mutable_reads()->end()) {
      total = &*same;
    } else {
      total = receipt->add_reads();
      total->set_dataset(figures.dataset());
      total->set_version(figures.version());
    }
    AddJobReads(figures, total);
    JoinReaders(figures.reader_uids(), receipt->mutable_reader_uids());
  }
  // A start the hook did not give is the job's first read.
  for (const v1::JobReads& version : receipt->reads()) {
    receipt->set_started_unix_ms(
        EarliestKnown(receipt->started_unix_ms(), version.first_read_unix_ms()));
  }
  std::sort(receipt->mutable_reads()->begin(), receipt->mutable_reads()->end(),
            [](const v1::JobReads& a, const v1::JobReads& b) {
              if (a.dataset() != b.dataset()) return a.dataset() < b.dataset();
              return a.version() < b.version();
            });
}

absl::StatusOr<JobReceipts::Ended> JobReceipts::End(std::string_view job, int64_t started_unix_ms,
                                                    std::vector<v1::JobReads> reads) {
  GRANARY_RETURN_IF_ERROR(ValidateJobName(job));
  MutexLock write(&write_mutex_);
  Ended ended;
  {
    MutexLock lock(&mutex_);
    auto it = kept_.find(std::string(job));
    if (it == kept_.end()) {
      v1::JobReceipt fresh;
      fresh.set_job(std::string(job));
      fresh.set_node_id(options_.node_id);
      fresh.set_group(options_.group);
      it = kept_.emplace(std::string(job), std::move(fresh)).first;
      order_.emplace_back(job);
      if (order_.size() > options_.max_kept) {
        kept_.erase(order_.front());
        order_.pop_front();
      }
    }
    v1::JobReceipt& receipt = it->second;
    AddReads(reads, &receipt);
    if (started_unix_ms > 0) receipt.set_started_unix_ms(started_unix_ms);
    receipt.set_ended_unix_ms(NowUnixMs());
    ended.receipt = receipt;
  }
  if (!options_.directory.empty() && ended.receipt.reads_size() > 0) {
    GRANARY_ASSIGN_OR_RETURN(ended.path, Write(ended.receipt));
  }
  return ended;
}

bool JobReceipts::AddLate(const v1::JobReads& figures) {
  MutexLock write(&write_mutex_);
  v1::JobReceipt receipt;
  {
    MutexLock lock(&mutex_);
    auto it = kept_.find(figures.job());
    if (it == kept_.end()) return false;
    AddReads({figures}, &it->second);
    receipt = it->second;
  }
  if (!options_.directory.empty()) {
    absl::StatusOr<std::string> written = Write(receipt);
    if (!written.ok()) {
      GRANARY_LOG(ERROR) << "receipt of job " << receipt.job() << ": "
                         << written.status().message();
    }
  }
  return true;
}

absl::StatusOr<v1::JobReceipt> JobReceipts::Get(std::string_view job) const {
  MutexLock lock(&mutex_);
  auto it = kept_.find(std::string(job));
  if (it == kept_.end() || it->second.reads().empty()) {
    return absl::NotFoundError(absl::StrCat("node ", options_.node_id, " keeps no receipt of job '",
                                            Printable(job),
                                            "': the job has not ended here, read nothing here, or "
                                            "ended before the ",
                                            options_.max_kept, " most recent"));
  }
  return it->second;
}

absl::StatusOr<std::string> JobReceipts::Write(const v1::JobReceipt& receipt) {
  const std::string path = absl::StrCat(options_.directory, "/",
                                        absl::StrReplaceAll(receipt.job(), {{":", "_"}}), ".json");
  const std::string aside = absl::StrCat(path, ".new");
  const std::string text = absl::StrCat(FormatJson(JobReceiptJson(receipt)), "\n");
  // A file left aside (a write cut short) is replaced by one of granaryd's
  // own: never written through, whatever stands there.
  if (::unlink(aside.c_str()) != 0 && errno != ENOENT) {
    return ErrnoStatus(errno, absl::StrCat("receipt file ", aside));
  }
  UniqueFd fd(
      ::open(aside.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, kReceiptMode));
  if (!fd.valid()) return ErrnoStatus(errno, absl::StrCat("receipt file ", aside));
  // The umask may have narrowed the mode asked.
  if (::fchmod(fd.get(), kReceiptMode) != 0 ||
      ::write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size()) ||
      ::fsync(fd.get()) != 0) {
    const int error = errno;
    ::unlink(aside.c_str());
    return ErrnoStatus(error, absl::StrCat("receipt file ", aside));
  }
  if (::rename(aside.c_str(), path.c_str()) != 0) {
    const int error = errno;
    ::unlink(aside.c_str());
    return ErrnoStatus(error, absl::StrCat("receipt file ", path));
  }
  return path;
}

}  // namespace granary
