// GranaryFs implements the libfuse3 low-level operations of a granary-fuse
// mount: a read-only tree whose root lists the datasets and whose metadata
// (lookup, getattr, readdir, readdirplus, readlink, statfs) comes from the
// manifests held in memory, with no RPC per file. Every operation that would
// change the tree or a file fails with EROFS. A file the local granaryd
// holds whole and verified is passed through: the kernel reads it from the
// cache's data file itself (PassthroughFiles). Other files are read through a
// FileReader per open file and keep the kernel's page cache (keep_cache),
// since a dataset version never changes. An ioctl is answered ENOTTY at once
// (Python's open() asks isatty() of every file).
//
// Extended attributes: the source's user.* attributes and POSIX ACLs, as the
// manifest holds them. The system's namespaces (security.*, trusted.*) are
// not supported (EOPNOTSUPP), as on a filesystem with no handler for them:
// a dataset holds none, and `ls -l` stops asking once it is told so.
//
// Permissions: every entry shows its source's owner, group and mode (the
// manifest's), and granary-fuse always mounts with default_permissions, so
// the kernel refuses a user exactly what the source's owners and modes
// refuse them -- search permission on every ancestor directory included --
// even on an allow_other mount served by root (invariant 7 of DESIGN.md).
//
// Older versions: files and directories opened before a refresh hold their
// version, whose attributes are the source's as they were. A new open in such
// a version is refused (EACCES) once the version the root shows changed the
// owner, group or mode of the file or of a directory above it, or dropped
// the file (newer_permissions.h): what the source took away, the mount takes
// away too, from every version.
//
// Timeouts: entries and attributes inside a dataset are cached by the kernel
// for a day (versions are immutable); names in the root for a second, so that
// datasets added, refreshed or removed show up promptly.
//
// Restarts: file handles are FileHandles, so that files and directories
// opened through an earlier granary-fuse of the mount (KeeperLink) go on
// being read, from the inode each request names.
//
// Thread-safety: the operations run concurrently on libfuse's worker threads;
// everything they touch is thread-safe.
#ifndef GRANARY_FUSE_CLIENT_OPERATIONS_FUSE_OPS_H_
#define GRANARY_FUSE_CLIENT_OPERATIONS_FUSE_OPS_H_

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

#include <cstdint>

#include "fuse_client/jobs/reading_jobs.h"
#include "fuse_client/kernel/kernel_channel.h"
#include "fuse_client/operations/dataset_refresher.h"
#include "fuse_client/operations/file_handles.h"
#include "fuse_client/operations/inode_table.h"
#include "fuse_client/passthrough/passthrough_files.h"
#include "fuse_client/read_path/file_reader.h"

namespace granary::fuse {

// Largest read the kernel sends (max_read, also negotiated in init()).
inline constexpr uint32_t kMaxRead = 1u << 20;

struct DirHandle;

class GranaryFs {
 public:
  // Everything must outlive the session; `passthrough` is null when files
  // are never passed through (no local granaryd to hand out whole files).
  // `generation` tags the file handles this process issues (FileHandles).
  // `jobs` (null: reads are not counted) gets each open file's job and what
  // it read: a read's bytes and time go to its slowest origin
  // (common/jobs/read_origin.h), bytes the kernel serves from a passed-through
  // file are counted whole at its open (as from the source when granaryd
  // read the file through for the open), and the reads the kernel answers
  // from its page cache are not seen.
  GranaryFs(InodeTable* table, DatasetRefresher* refresher, const FileReader::Context& read_path,
            KernelChannel* channel, PassthroughFiles* passthrough, uint16_t generation,
            ReadingJobs* jobs = nullptr);
  ~GranaryFs();

  // The operation table; fuse_session_new()'s userdata must be this object.
  static const fuse_lowlevel_ops& Operations();

  // Routes `session`'s I/O through the channel (KernelChannel::Attach).
  absl::Status AttachChannel(fuse_session* session);

 private:
  friend struct Ops;

  InodeTable* const table_;
  DatasetRefresher* const refresher_;
  const FileReader::Context read_path_;
  KernelChannel* const channel_;
  PassthroughFiles* const passthrough_;
  ReadingJobs* const jobs_;
  FileHandles<FileReader> files_;
  FileHandles<DirHandle> dirs_;
};

}  // namespace granary::fuse

#endif  // GRANARY_FUSE_CLIENT_OPERATIONS_FUSE_OPS_H_
