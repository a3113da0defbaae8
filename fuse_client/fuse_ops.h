// GranaryFs implements the libfuse3 low-level operations of a granary-fuse
// mount: a read-only tree whose root lists the datasets and whose metadata
// (lookup, getattr, readdir, readdirplus, readlink, statfs) comes from the
// manifests held in memory, with no RPC per file. Every operation that would
// change the tree or a file fails with EROFS. Reads go through a FileReader
// per open file; open files keep the kernel's page cache (keep_cache), since
// a dataset version never changes.
//
// Permissions: every entry shows its source's owner, group and mode (the
// manifest's), and granary-fuse always mounts with default_permissions, so
// the kernel refuses a user exactly what the source's owners and modes
// refuse them -- search permission on every ancestor directory included --
// even on an allow_other mount served by root (invariant 7 of DESIGN.md).
//
// Timeouts: entries and attributes inside a dataset are cached by the kernel
// for a day (versions are immutable); names in the root for a second, so that
// datasets added, refreshed or removed show up promptly.
//
// Thread-safety: the operations run concurrently on libfuse's worker threads;
// everything they touch is thread-safe.
#ifndef GRANARY_FUSE_CLIENT_FUSE_OPS_H_
#define GRANARY_FUSE_CLIENT_FUSE_OPS_H_

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

#include <cstdint>

#include "fuse_client/dataset_refresher.h"
#include "fuse_client/file_reader.h"
#include "fuse_client/inode_table.h"

namespace granary::fuse {

// Largest read the kernel sends (max_read, also negotiated in init()).
inline constexpr uint32_t kMaxRead = 1u << 20;

class GranaryFs {
 public:
  // Everything must outlive the session.
  GranaryFs(InodeTable* table, DatasetRefresher* refresher, const FileReader::Context& read_path)
      : table_(table), refresher_(refresher), read_path_(read_path) {}

  // The operation table; fuse_session_new()'s userdata must be this object.
  static const fuse_lowlevel_ops& Operations();

 private:
  friend struct Ops;

  InodeTable* const table_;
  DatasetRefresher* const refresher_;
  const FileReader::Context read_path_;
};

}  // namespace granary::fuse

#endif  // GRANARY_FUSE_CLIENT_FUSE_OPS_H_
