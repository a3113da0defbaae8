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
#include "common/base/absl_compat.h"
#include "common/base/printable.h"
#include "common/base/status.h"
#include "common/base/unique_fd.h"

namespace granary::csi_driver {
namespace {

// Mounts stacked at one target (a publish retried by hand, say) that an
// unpublish removes before it gives up.
constexpr int kMaxStackedMounts = 64;

std::string Errno(int error_number) { return std::strerror(error_number); }

// A target_path as the directory it is in, held open, and its name there.
// That directory is the kubelet's (the pod's volume directory) and is opened
// as the path given leads to it; the name in it is never followed.
struct TargetAt {
  UniqueFd parent;
  std::string name;
};

absl::StatusOr<TargetAt> OpenTargetParent(const std::string& target) {
  std::string_view path = target;
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  const size_t slash = path.rfind('/');
  TargetAt at;
  at.name = std::string(path.substr(slash + 1));
  if (at.name.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("target_path ", target, " names no directory"));
  }
  const std::string parent(slash == 0 ? "/" : path.substr(0, slash));
  at.parent = UniqueFd(open(parent.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!at.parent.valid()) {
    int error_number = errno;
    if (error_number == ENOENT) {
      return absl::NotFoundError(
          absl::StrCat("the directory of target_path ", target, " (", parent, ") does not exist"));
    }
    return ErrnoStatus(error_number, absl::StrCat("opening the directory of target_path ", target));
  }
  return at;
}

// The file a descriptor holds, named again without looking up the names
// that led to it: "/proc/self/fd/N", then `name` in it when given.
std::string DescriptorPath(int fd, std::string_view name = {}) {
  return name.empty() ? absl::StrCat("/proc/self/fd/", fd)
                      : absl::StrCat("/proc/self/fd/", fd, "/", AsAbsl(name));
}

absl::Status SymlinkTarget(const std::string& target) {
  return absl::FailedPreconditionError(
      absl::StrCat("target_path ", target,
                   " is a symbolic link: granary-csi mounts only on a directory it reaches "
                   "without following one (remove the link)"));
}

bool IsSymlink(const TargetAt& at) {
  struct stat link;
  return fstatat(at.parent.get(), at.name.c_str(), &link, AT_SYMLINK_NOFOLLOW) == 0 &&
         S_ISLNK(link.st_mode);
}

// The target directory, created if missing; a symlink there is refused.
absl::StatusOr<UniqueFd> OpenTargetDirectory(const TargetAt& at, const std::string& target) {
  if (mkdirat(at.parent.get(), at.name.c_str(), 0755) != 0 && errno != EEXIST) {
    return ErrnoStatus(errno, absl::StrCat("creating target_path ", target));
  }
  UniqueFd directory(
      openat(at.parent.get(), at.name.c_str(), O_PATH | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC));
  if (directory.valid()) return directory;
  int error_number = errno;
  if (IsSymlink(at)) return SymlinkTarget(target);
  if (error_number == ENOTDIR) {
    return absl::FailedPreconditionError(
        absl::StrCat("target_path ", target, " is not a directory"));
  }
  return ErrnoStatus(error_number, absl::StrCat("opening target_path ", target));
}

// The statx of descriptor `fd` itself, without asking a FUSE server.
bool StatxOf(int fd, struct statx* result) {
  return statx(fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_MNT_ID, result) == 0;
}

// Makes the bind mount just made on directory `covered`, the target `at`,
// read-only, nosuid and nodev, once it is known to be the mount at `at`.
absl::Status SealBindMount(const TargetAt& at, int covered, const std::string& granary_device,
                           const std::string& target) {
  // The new mount's root is found again by name (a descriptor of the
  // directory it covers does not lead to it), so it must be what was just
  // mounted there: a mount root on granary-fuse's device, above the covered
  // directory's mount. A mount point cannot be renamed, so once this holds
  // the name stays.
  UniqueFd mounted(
      openat(at.parent.get(), at.name.c_str(), O_PATH | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC));
  struct statx below = {}, top = {};
  if (!mounted.valid() || !StatxOf(covered, &below) || !StatxOf(mounted.get(), &top) ||
      (top.stx_attributes & STATX_ATTR_MOUNT_ROOT) == 0 || top.stx_mnt_id == below.stx_mnt_id ||
      absl::StrCat(top.stx_dev_major, ":", top.stx_dev_minor) != granary_device) {
    return absl::FailedPreconditionError(
        absl::StrCat("target_path ", target,
                     " was replaced while the dataset was bind-mounted on it; the bind mount "
                     "stays on the directory that was there, read-only as the granary-fuse mount"));
  }
  // A bind mount takes its flags only from a remount of it.
  const std::string root = DescriptorPath(mounted.get());
  if (mount(nullptr, root.c_str(), nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV,
            nullptr) != 0) {
    absl::Status failed =
        ErrnoStatus(errno, absl::StrCat("making the bind mount at ", target, " read-only"));
    umount2(root.c_str(), MNT_DETACH);
    return failed;
  }
  return absl::OkStatus();
}

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

  GRANARY_ASSIGN_OR_RETURN(TargetAt at, OpenTargetParent(target));
  GRANARY_ASSIGN_OR_RETURN(UniqueFd directory, OpenTargetDirectory(at, target));

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

  // On the directory opened above, whatever its name leads to by now.
  if (mount(source.c_str(), DescriptorPath(directory.get()).c_str(), nullptr, MS_BIND, nullptr) !=
      0) {
    return ErrnoStatus(errno, absl::StrCat("bind-mounting ", source, " on ", target));
  }
  return SealBindMount(at, directory.get(), granary.device, target);
}

absl::Status DatasetMounts::Unpublish(const std::string& target) const {
  absl::StatusOr<TargetAt> at = OpenTargetParent(target);
  if (absl::IsNotFound(at.status())) return absl::OkStatus();
  if (!at.ok()) return at.status();
  // Looked up in the directory opened above, and not followed.
  const std::string named = DescriptorPath(at->parent.get(), at->name);
  for (int i = 0; i < kMaxStackedMounts; ++i) {
    if (umount2(named.c_str(), UMOUNT_NOFOLLOW) == 0) continue;
    int error_number = errno;
    if (error_number == ENOENT) return absl::OkStatus();
    if (error_number == EINVAL) break;  // Not a mount point (any more).
    return ErrnoStatus(error_number, absl::StrCat("unmounting target_path ", target));
  }
  if (unlinkat(at->parent.get(), at->name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) {
    int error_number = errno;
    if (IsSymlink(*at)) {
      return absl::FailedPreconditionError(
          absl::StrCat("target_path ", target,
                       " is a symbolic link, not a directory granary-csi publishes on: nothing "
                       "was unmounted (remove the link)"));
    }
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
