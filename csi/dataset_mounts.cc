#include "csi/dataset_mounts.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/absl_compat.h"
#include "common/printable.h"
#include "common/status.h"
#include "common/unique_fd.h"

namespace granary::csi_driver {
namespace {

// Mounts stacked at one target (a publish retried by hand, say) that an
// unpublish removes before it gives up.
constexpr int kMaxStackedMounts = 64;

std::string Errno(int error_number) { return std::strerror(error_number); }

}  // namespace

DatasetMounts::DatasetMounts(std::string mount_root) : mount_root_(std::move(mount_root)) {}

absl::StatusOr<MountEntry> DatasetMounts::GranaryMount(const std::vector<MountEntry>& table) const {
  const MountEntry* entry = TopmostMountAt(table, mount_root_);
  if (entry == nullptr || entry->fs_type != kGranaryFsType || entry->root != "/") {
    return absl::FailedPreconditionError(
        absl::StrCat(mount_root_, " is not a granary-fuse mount (",
                     entry == nullptr ? std::string("nothing is mounted there")
                                      : absl::StrCat("it is ", entry->fs_type, " of ", entry->root),
                     "): start granary-fuse there, or pass --mount with its mount point"));
  }
  return *entry;
}

absl::Status DatasetMounts::CheckServing() const {
  GRANARY_ASSIGN_OR_RETURN(std::vector<MountEntry> table, ReadMountTable());
  GRANARY_RETURN_IF_ERROR(GranaryMount(table).status());
  // statfs always reaches granary-fuse; stat may be answered from the
  // kernel's attribute cache after it died.
  struct statfs root;
  if (statfs(mount_root_.c_str(), &root) != 0) {
    int error_number = errno;
    return absl::UnavailableError(absl::StrCat("granary-fuse at ", mount_root_,
                                               " does not answer (", Errno(error_number),
                                               "): it exited and left its mount behind"));
  }
  return absl::OkStatus();
}

absl::Status DatasetMounts::CheckDatasetReadable(std::string_view dataset,
                                                 const std::string& source) const {
  struct stat directory;
  if (stat(source.c_str(), &directory) != 0 || !S_ISDIR(directory.st_mode)) {
    int error_number = errno;
    if (error_number == ENOTCONN) GRANARY_RETURN_IF_ERROR(CheckServing());
    return absl::NotFoundError(absl::StrCat(
        "dataset '", Printable(dataset), "' is not in the granary-fuse mount at ", mount_root_,
        " (`granary dataset ls` lists the registered datasets; the mount shows a new one "
        "within 2 s)"));
  }
  UniqueFd opened(open(source.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!opened.valid()) {
    int error_number = errno;
    if (error_number == ENOTCONN) GRANARY_RETURN_IF_ERROR(CheckServing());
    return absl::FailedPreconditionError(absl::StrCat("dataset '", Printable(dataset), "' at ",
                                                      source,
                                                      " cannot be read: ", Errno(error_number)));
  }
  return absl::OkStatus();
}

absl::Status DatasetMounts::Publish(std::string_view dataset, const std::string& target) const {
  GRANARY_RETURN_IF_ERROR(CheckServing());
  std::string source = absl::StrCat(mount_root_, "/", AsAbsl(dataset));
  GRANARY_RETURN_IF_ERROR(CheckDatasetReadable(dataset, source));

  if (mkdir(target.c_str(), 0755) != 0 && errno != EEXIST) {
    return ErrnoStatus(errno, absl::StrCat("creating target_path ", target));
  }
  struct stat target_stat;
  if (stat(target.c_str(), &target_stat) != 0 || !S_ISDIR(target_stat.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("target_path ", target, " is not a directory"));
  }

  GRANARY_ASSIGN_OR_RETURN(std::vector<MountEntry> table, ReadMountTable());
  GRANARY_ASSIGN_OR_RETURN(MountEntry granary, GranaryMount(table));
  if (const MountEntry* present = TopmostMountAt(table, target); present != nullptr) {
    std::string wanted_root = absl::StrCat("/", AsAbsl(dataset));
    if (present->device == granary.device && present->root == wanted_root && present->read_only) {
      return absl::OkStatus();
    }
    return absl::AlreadyExistsError(
        absl::StrCat("target_path ", target, " already holds a mount of ", Printable(present->root),
                     " (", present->fs_type, present->read_only ? ", read-only" : ", read-write",
                     "), not dataset '", Printable(dataset), "' read-only"));
  }

  if (mount(source.c_str(), target.c_str(), nullptr, MS_BIND, nullptr) != 0) {
    return ErrnoStatus(errno, absl::StrCat("bind-mounting ", source, " on ", target));
  }
  // A bind mount takes its flags only from a remount of it.
  if (mount(nullptr, target.c_str(), nullptr,
            MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, nullptr) != 0) {
    absl::Status failed =
        ErrnoStatus(errno, absl::StrCat("making the bind mount at ", target, " read-only"));
    umount2(target.c_str(), MNT_DETACH);
    return failed;
  }
  return absl::OkStatus();
}

absl::Status DatasetMounts::Unpublish(const std::string& target) const {
  for (int i = 0; i < kMaxStackedMounts; ++i) {
    if (umount2(target.c_str(), UMOUNT_NOFOLLOW) == 0) continue;
    int error_number = errno;
    if (error_number == ENOENT) return absl::OkStatus();
    if (error_number == EINVAL) break;  // Not a mount point (any more).
    return ErrnoStatus(error_number, absl::StrCat("unmounting target_path ", target));
  }
  if (rmdir(target.c_str()) != 0 && errno != ENOENT) {
    int error_number = errno;
    return absl::FailedPreconditionError(absl::StrCat(
        "target_path ", target, " was unmounted but cannot be removed: ", Errno(error_number)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> DatasetMounts::PublishedDataset(const std::string& path) const {
  GRANARY_ASSIGN_OR_RETURN(std::vector<MountEntry> table, ReadMountTable());
  const MountEntry* present = TopmostMountAt(table, path);
  bool is_dataset = present != nullptr && present->fs_type == kGranaryFsType &&
                    present->root.size() > 1 && present->root.find('/', 1) == std::string::npos;
  if (!is_dataset) {
    return absl::NotFoundError(
        absl::StrCat("no granary dataset is published at volume_path ", path));
  }
  return present->root.substr(1);
}

}  // namespace granary::csi_driver
