#include "fuse_client/operations/fuse_ops.h"

#include <fcntl.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/jobs/read_origin.h"
#include "fuse_client/operations/newer_permissions.h"

namespace granary::fuse {

namespace {

constexpr double kImmutableTimeout = 86400.0;  // Inside a dataset version.
constexpr double kRootTimeout = 1.0;           // Dataset names in the root.

int ErrnoOf(const absl::Status& status) {
  return status.code() == absl::StatusCode::kFailedPrecondition ? ESTALE : EIO;
}

int64_t NanosSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() -
                                                              start)
      .count();
}

}  // namespace

// What opendir() captured: of the root, its datasets, so one listing is
// consistent across readdir calls while datasets come and go; of a
// directory in a dataset, its version, which an open directory holds as an
// open file does (InodeTable::ReleaseUnused).
struct DirHandle {
  std::vector<InodeTable::Listed> datasets;
  std::shared_ptr<const MountedDataset> version;
};

GranaryFs::GranaryFs(InodeTable* table, DatasetRefresher* refresher,
                     const FileReader::Context& read_path, KernelChannel* channel,
                     PassthroughFiles* passthrough, uint16_t generation, ReadingJobs* jobs)
    : table_(table),
      refresher_(refresher),
      read_path_(read_path),
      channel_(channel),
      passthrough_(passthrough),
      jobs_(jobs),
      files_(generation),
      dirs_(generation) {}

GranaryFs::~GranaryFs() = default;

struct Ops {
  static GranaryFs& Fs(fuse_req_t req) { return *static_cast<GranaryFs*>(fuse_req_userdata(req)); }

  // Hard links of one file fill the same entry: one inode, as in the source.
  static void FillEntry(const MountedDataset& dataset, uint64_t node, double timeout,
                        fuse_entry_param* entry) {
    node = dataset.CanonicalNode(node);
    *entry = {};
    entry->ino = dataset.InodeOf(node);
    entry->generation = 1;
    dataset.Stat(node, &entry->attr);
    entry->attr_timeout = timeout;
    entry->entry_timeout = timeout;
  }

  static void Init(void* userdata, fuse_conn_info* conn) {
    (void)userdata;
    conn->max_read = kMaxRead;
    conn->max_write = kMaxRead;  // libfuse sizes the kernel's max_pages from it.
    conn->max_readahead = UINT_MAX;
    conn->time_gran = 1;
    conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;  // Files never change: keep the page cache.
    if (conn->capable & FUSE_CAP_ASYNC_READ) conn->want |= FUSE_CAP_ASYNC_READ;
    if (conn->capable & FUSE_CAP_CACHE_SYMLINKS) conn->want |= FUSE_CAP_CACHE_SYMLINKS;
    // The kernel enforces the source's ACLs (system.posix_acl_access, asked
    // once per inode) beside default_permissions' owner and mode.
    if (conn->capable & FUSE_CAP_POSIX_ACL) conn->want |= FUSE_CAP_POSIX_ACL;
  }

  static void Lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
    GranaryFs& fs = Fs(req);
    fuse_entry_param entry;
    if (parent == kRootInode) {
      fs.refresher_->MaybeRefresh();
      absl::StatusOr<std::shared_ptr<const MountedDataset>> dataset = fs.table_->FindDataset(name);
      if (!dataset.ok()) {
        fuse_reply_err(req, absl::IsNotFound(dataset.status()) ? ENOENT : EIO);
        return;
      }
      FillEntry(**dataset, 0, kRootTimeout, &entry);
      fuse_reply_entry(req, &entry);
      return;
    }
    InodeTable::Node dir = fs.table_->Resolve(parent);
    if (dir.dataset == nullptr) {
      fuse_reply_err(req, ESTALE);
      return;
    }
    std::optional<uint64_t> child = dir.dataset->Lookup(dir.node, name);
    if (!child) {
      entry = {};  // A negative entry: the name stays absent for good.
      entry.entry_timeout = kImmutableTimeout;
      fuse_reply_entry(req, &entry);
      return;
    }
    FillEntry(*dir.dataset, *child, kImmutableTimeout, &entry);
    fuse_reply_entry(req, &entry);
  }

  static void GetAttr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) {
    GranaryFs& fs = Fs(req);
    struct stat st;
    if (ino == kRootInode) {
      fs.table_->StatRoot(&st);
      fuse_reply_attr(req, &st, kRootTimeout);
      return;
    }
    InodeTable::Node node = fs.table_->Resolve(ino);
    if (node.dataset == nullptr) {
      fuse_reply_err(req, ESTALE);
      return;
    }
    node.dataset->Stat(node.node, &st);
    fuse_reply_attr(req, &st, node.node == 0 ? kRootTimeout : kImmutableTimeout);
  }

  static void ReadLink(fuse_req_t req, fuse_ino_t ino) {
    InodeTable::Node node = Fs(req).table_->Resolve(ino);
    const ManifestEntry* entry = node.dataset ? node.dataset->EntryOf(node.node) : nullptr;
    if (entry == nullptr || entry->type != EntryType::kSymlink) {
      fuse_reply_err(req, EINVAL);
      return;
    }
    fuse_reply_readlink(req, entry->symlink_target().c_str());
  }

  // The handle of directory `ino`, or null when its version is gone.
  static std::unique_ptr<DirHandle> NewDirHandle(GranaryFs& fs, fuse_ino_t ino) {
    if (ino == kRootInode) {
      return std::make_unique<DirHandle>(DirHandle{fs.table_->ListDatasets(), nullptr});
    }
    InodeTable::Node node = fs.table_->Resolve(ino);
    if (node.dataset == nullptr) return nullptr;
    return std::make_unique<DirHandle>(DirHandle{{}, node.dataset});
  }

  static DirHandle* FindDir(GranaryFs& fs, fuse_ino_t ino, fuse_file_info* fi) {
    return fs.dirs_.Find(fi->fh, [&] { return NewDirHandle(fs, ino); });
  }

  static void OpenDir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
    GranaryFs& fs = Fs(req);
    if (ino == kRootInode) fs.refresher_->MaybeRefresh();
    std::unique_ptr<DirHandle> handle = NewDirHandle(fs, ino);
    if (handle == nullptr) {
      fuse_reply_err(req, ESTALE);
      return;
    }
    if (ino != kRootInode) {
      fi->cache_readdir = ino != handle->version->InodeOf(0);
      fi->keep_cache = fi->cache_readdir;
    }
    fi->fh = fs.dirs_.Issue(std::move(handle));
    if (fuse_reply_open(req, fi) == -ENOENT) {  // The opendir was interrupted.
      fs.dirs_.Release(fi->fh);
    }
  }

  static void ReleaseDir(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
    Fs(req).dirs_.Release(fi->fh);
    fuse_reply_err(req, 0);
  }

  // Lists [".", "..", children...] from index `offset` into a reply of at
  // most `size` bytes; `plus` adds attributes (readdirplus).
  static void ReadDir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t offset, fuse_file_info* fi,
                      bool plus) {
    GranaryFs& fs = Fs(req);
    InodeTable::Node dir;
    uint64_t count;
    DirHandle* handle = FindDir(fs, ino, fi);
    if (handle == nullptr) {
      fuse_reply_err(req, ESTALE);
      return;
    }
    if (ino == kRootInode) {
      count = handle->datasets.size();
    } else {
      dir = fs.table_->Resolve(ino);
      if (dir.dataset == nullptr) {
        fuse_reply_err(req, ESTALE);
        return;
      }
      count = dir.dataset->Children(dir.node).size();
    }
    std::string buffer(size, '\0');
    size_t used = 0;
    for (uint64_t index = static_cast<uint64_t>(offset); index < count + 2; ++index) {
      fuse_entry_param entry = {};
      std::string_view name;
      if (index < 2) {
        name = index == 0 ? "." : "..";
        entry.ino = index == 0 ? ino : kRootInode;
        entry.attr.st_ino = entry.ino;
        entry.attr.st_mode = S_IFDIR;
      } else if (ino == kRootInode) {
        const InodeTable::Listed& dataset = handle->datasets[index - 2];
        name = dataset.name;
        if (dataset.loaded != nullptr) {
          FillEntry(*dataset.loaded, 0, kRootTimeout, &entry);
        } else {
          // Not in memory: listed without attributes (a node id of 0 makes
          // no kernel entry), so that a listing of the root loads nothing;
          // a lookup of the name loads it.
          entry.attr.st_ino = dataset.inode;
          entry.attr.st_mode = S_IFDIR;
        }
      } else {
        uint64_t child = dir.dataset->Children(dir.node)[index - 2];
        name = dir.dataset->NameOf(child);
        FillEntry(*dir.dataset, child, kImmutableTimeout, &entry);
      }
      std::string name_z(name);
      char* at = buffer.data() + used;
      size_t room = size - used;
      size_t needed =
          plus ? fuse_add_direntry_plus(req, at, room, name_z.c_str(), &entry, index + 1)
               : fuse_add_direntry(req, at, room, name_z.c_str(), &entry.attr, index + 1);
      if (needed > room) break;
      used += needed;
    }
    fuse_reply_buf(req, buffer.data(), used);
  }

  static void ReadDirPlain(fuse_req_t req, fuse_ino_t ino, size_t size, off_t offset,
                           fuse_file_info* fi) {
    ReadDir(req, ino, size, offset, fi, false);
  }
  static void ReadDirPlus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t offset,
                          fuse_file_info* fi) {
    ReadDir(req, ino, size, offset, fi, true);
  }

  // Why file `node` may not be opened anew in its version, as an errno, or 0
  // when it may: always in the version the root shows; in an older one, held
  // by open files and directories, only while the shown version keeps the
  // permissions along its path (newer_permissions.h; else EACCES). A dataset
  // no longer shown (removed) opens nothing: its names are stale, as those of
  // a released version are (ESTALE), which no permission would change.
  static int OpenRefusal(GranaryFs& fs, const InodeTable::Node& node) {
    const MountedDataset& version = *node.dataset;
    std::optional<uint32_t> shown = fs.table_->ShownSlot(version.name());
    if (shown == version.slot()) return 0;
    if (!shown) return ESTALE;
    absl::StatusOr<std::shared_ptr<const MountedDataset>> newest =
        fs.table_->FindDataset(version.name());
    if (!newest.ok()) return ESTALE;
    return NewerKeepsPermissions(version.snapshot().manifest, MountedDataset::FileIdOf(node.node),
                                 (*newest)->snapshot().manifest)
               ? 0
               : EACCES;
  }

  static void Open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
    GranaryFs& fs = Fs(req);
    if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC) != 0) {
      fuse_reply_err(req, EROFS);
      return;
    }
    InodeTable::Node node = fs.table_->Resolve(ino);
    if (node.dataset == nullptr) {
      fuse_reply_err(req, ino == kRootInode ? EISDIR : ESTALE);
      return;
    }
    const ManifestEntry* entry = node.dataset->EntryOf(node.node);
    if (entry == nullptr || entry->type != EntryType::kFile) {
      fuse_reply_err(req, entry != nullptr && entry->type == EntryType::kSymlink ? ELOOP : EISDIR);
      return;
    }
    if (int refusal = OpenRefusal(fs, node); refusal != 0) {
      fuse_reply_err(req, refusal);
      return;
    }
    const auto started = std::chrono::steady_clock::now();
    ReadOriginScope origins;
    auto file = std::make_shared<OpenFile>(node.dataset, node.node);
    if (fs.jobs_ != nullptr) {
      const fuse_ctx* caller = fuse_req_ctx(req);
      file->job_reads = fs.jobs_->CountersFor(caller->pid, caller->uid, node.dataset->name(),
                                              node.dataset->snapshot().info.version());
    }
    if (fs.passthrough_ != nullptr) {
      const DatasetSnapshot& snapshot = file->dataset->snapshot();
      file->backing_id = fs.passthrough_->Open(*file, [&](uint64_t file_id, uint64_t size) {
        return fs.read_path_.fetcher->OwnedLocallyWhole(snapshot, file_id, size);
      });
    }
    const uint64_t handle = fs.files_.Issue(std::make_unique<FileReader>(file, fs.read_path_));
    int replied;
    if (file->backing_id > 0) {
      // The kernel reads the backing file itself; reads that still arrive
      // (readahead(2), fadvise) are served by the reader. The kernel keeps
      // no page cache of its own for a passed-through file.
      replied = KernelChannel::ReplyOpenPassthrough(req, handle, file->backing_id);
    } else {
      fi->fh = handle;
      fi->keep_cache = 1;
      fi->noflush = 1;
      replied = fuse_reply_open(req, fi);
    }
    if (replied == -ENOENT) {
      ReleaseReader(fs, handle, ino);  // The open was interrupted.
    } else if (file->job_reads != nullptr) {
      file->job_reads->Opened(NanosSince(started));
      // A file granaryd read through for this open counts as read from the source.
      if (file->backing_id > 0) {
        file->job_reads->Read(origins.slowest().value_or(ReadOrigin::kPassthrough), entry->size, 0);
      }
    }
  }

  static void ReleaseReader(GranaryFs& fs, uint64_t handle, fuse_ino_t ino) {
    const bool inherited = !fs.files_.IssuedHere(handle);
    std::unique_ptr<FileReader> reader = fs.files_.Release(handle);
    if (fs.passthrough_ == nullptr) return;
    if (inherited) {
      fs.passthrough_->ReleaseInherited(ino);
    } else {
      fs.passthrough_->Release(reader->file().inode, reader->file().backing_id);
    }
  }

  // A file opened through an earlier granary-fuse of the mount, read through
  // this one (never passed through: the kernel holds the backing file of one
  // that was). Null when its version is gone.
  static std::unique_ptr<FileReader> AdoptReader(GranaryFs& fs, fuse_ino_t ino) {
    InodeTable::Node node = fs.table_->Resolve(ino);
    const ManifestEntry* entry = node.dataset ? node.dataset->EntryOf(node.node) : nullptr;
    if (entry == nullptr || entry->type != EntryType::kFile) return nullptr;
    return std::make_unique<FileReader>(std::make_shared<OpenFile>(node.dataset, node.node),
                                        fs.read_path_);
  }

  static void Read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t offset, fuse_file_info* fi) {
    GranaryFs& fs = Fs(req);
    FileReader* reader = fs.files_.Find(fi->fh, [&] { return AdoptReader(fs, ino); });
    if (reader == nullptr) {
      fuse_reply_err(req, ESTALE);
      return;
    }
    const auto started = std::chrono::steady_clock::now();
    ReadOriginScope origins;
    // Held, not borrowed: once answered, the file may be released (and its
    // reader freed) by another thread before this one counts the read.
    const std::shared_ptr<JobReadCounters> job = reader->file().job_reads;
    PageStore* page_store = fs.read_path_.page_store;
    PageStore::Answering answering =
        page_store->BeginAnswer(ino, static_cast<uint64_t>(offset), size);
    absl::StatusOr<FileReader::Reply> reply = reader->Read(static_cast<uint64_t>(offset), size);
    if (reply.ok()) {
      fuse_reply_buf(req, reply->bytes.data(), reply->bytes.size());
    } else {
      fuse_reply_err(req, ErrnoOf(reply.status()));
    }
    page_store->EndAnswer(answering);
    if (job == nullptr) return;
    if (reply.ok()) {
      // Nothing noted: the bytes were in granary-fuse's chunk cache.
      job->Read(origins.slowest().value_or(ReadOrigin::kMemory), reply->bytes.size(),
                NanosSince(started));
    } else {
      job->Failed();
    }
  }

  static void Release(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
    ReleaseReader(Fs(req), fi->fh, ino);
    fuse_reply_err(req, 0);
  }

  static void Ioctl(fuse_req_t req, fuse_ino_t, unsigned int, void*, fuse_file_info*, unsigned,
                    const void*, size_t, size_t) {
    fuse_reply_err(req, ENOTTY);
  }

  // libfuse's custom I/O, through the channel.
  static ssize_t ReadHook(int fd, void* buffer, size_t size, void* userdata) {
    return static_cast<GranaryFs*>(userdata)->channel_->Read(fd, buffer, size);
  }
  static ssize_t WritevHook(int fd, struct iovec* iov, int count, void* userdata) {
    return static_cast<GranaryFs*>(userdata)->channel_->Writev(fd, iov, count);
  }

  // Sizes as squashfs reports them (blocks all used, none free) on a mount
  // flagged read-only, which disk-space alerts skip. Inode counts are 0, as
  // filesystems without an inode limit report them, so that inode alerts see
  // nothing to run out of.
  static void StatFs(fuse_req_t req, fuse_ino_t) {
    struct statvfs st = {};
    st.f_bsize = st.f_frsize = kMaxRead;
    for (const InodeTable::Listed& dataset : Fs(req).table_->ListDatasets()) {
      st.f_blocks += (dataset.total_bytes + kMaxRead - 1) / kMaxRead;
    }
    st.f_namemax = NAME_MAX;
    st.f_flag = ST_RDONLY;
    fuse_reply_statfs(req, &st);
  }

  // The source's user.* attributes and ACLs; every other name in those
  // namespaces has none (ENODATA), so tools that copy attributes see a clean
  // empty answer.
  static const std::vector<ExtendedAttribute>* XattrsOf(fuse_req_t req, fuse_ino_t ino) {
    static const std::vector<ExtendedAttribute> kNone;
    InodeTable::Node node = Fs(req).table_->Resolve(ino);
    const ManifestEntry* entry = node.dataset ? node.dataset->EntryOf(node.node) : nullptr;
    if (entry != nullptr) return &entry->xattrs();
    return ino == kRootInode || node.dataset != nullptr ? &kNone : nullptr;
  }

  // Replies with `value`, or its size when the caller asks for it (size 0).
  static void ReplyXattr(fuse_req_t req, std::string_view value, size_t size) {
    if (size == 0) {
      fuse_reply_xattr(req, value.size());
    } else if (size < value.size()) {
      fuse_reply_err(req, ERANGE);
    } else {
      fuse_reply_buf(req, value.data(), value.size());
    }
  }

  // The system's namespaces, which a dataset never holds (the scanner keeps
  // user.* and ACLs only): asked about them, the mount answers what the
  // kernel answers for a namespace a filesystem has no handler for. The
  // kernel caches no answer to getxattr, but `ls -l` asks security.selinux
  // of every entry unless told the device does not support it, and then
  // stops asking for the rest of its run: one request per listing instead of
  // one per entry.
  static bool InSystemNamespace(std::string_view name) {
    return name.starts_with("security.") || name.starts_with("trusted.");
  }

  static void GetXattr(fuse_req_t req, fuse_ino_t ino, const char* name, size_t size) {
    if (InSystemNamespace(name)) {
      fuse_reply_err(req, EOPNOTSUPP);
      return;
    }
    const std::vector<ExtendedAttribute>* xattrs = XattrsOf(req, ino);
    if (xattrs == nullptr) {
      fuse_reply_err(req, ESTALE);
      return;
    }
    auto it = std::lower_bound(xattrs->begin(), xattrs->end(), std::string_view(name),
                               [](const ExtendedAttribute& xattr, std::string_view wanted) {
                                 return xattr.name < wanted;
                               });
    if (it == xattrs->end() || it->name != name) {
      fuse_reply_err(req, ENODATA);
      return;
    }
    ReplyXattr(req, it->value, size);
  }

  static void ListXattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
    const std::vector<ExtendedAttribute>* xattrs = XattrsOf(req, ino);
    if (xattrs == nullptr) {
      fuse_reply_err(req, ESTALE);
      return;
    }
    std::string names;
    for (const ExtendedAttribute& xattr : *xattrs) names.append(xattr.name).push_back('\0');
    ReplyXattr(req, names, size);
  }

  // Everything that would change the tree or a file.
  static void ReadOnly(fuse_req_t req) { fuse_reply_err(req, EROFS); }
  static void SetAttr(fuse_req_t req, fuse_ino_t, struct stat*, int, fuse_file_info*) {
    ReadOnly(req);
  }
  static void MkNod(fuse_req_t req, fuse_ino_t, const char*, mode_t, dev_t) { ReadOnly(req); }
  static void MkDir(fuse_req_t req, fuse_ino_t, const char*, mode_t) { ReadOnly(req); }
  static void Unlink(fuse_req_t req, fuse_ino_t, const char*) { ReadOnly(req); }
  static void SymLink(fuse_req_t req, const char*, fuse_ino_t, const char*) { ReadOnly(req); }
  static void Rename(fuse_req_t req, fuse_ino_t, const char*, fuse_ino_t, const char*,
                     unsigned int) {
    ReadOnly(req);
  }
  static void Link(fuse_req_t req, fuse_ino_t, fuse_ino_t, const char*) { ReadOnly(req); }
  static void Write(fuse_req_t req, fuse_ino_t, const char*, size_t, off_t, fuse_file_info*) {
    ReadOnly(req);
  }
  static void SetXattr(fuse_req_t req, fuse_ino_t, const char*, const char*, size_t, int) {
    ReadOnly(req);
  }
  static void RemoveXattr(fuse_req_t req, fuse_ino_t, const char*) { ReadOnly(req); }
  static void Create(fuse_req_t req, fuse_ino_t, const char*, mode_t, fuse_file_info*) {
    ReadOnly(req);
  }
  static void Fallocate(fuse_req_t req, fuse_ino_t, int, off_t, off_t, fuse_file_info*) {
    ReadOnly(req);
  }
};

absl::Status GranaryFs::AttachChannel(fuse_session* session) {
  const fuse_custom_io hooks = {.writev = Ops::WritevHook,
                                .read = Ops::ReadHook,
                                .splice_receive = nullptr,
                                .splice_send = nullptr};
  return channel_->Attach(session, hooks);
}

const fuse_lowlevel_ops& GranaryFs::Operations() {
  static const fuse_lowlevel_ops ops = [] {
    fuse_lowlevel_ops o = {};
    o.init = Ops::Init;
    o.lookup = Ops::Lookup;
    o.getattr = Ops::GetAttr;
    o.readlink = Ops::ReadLink;
    o.opendir = Ops::OpenDir;
    o.readdir = Ops::ReadDirPlain;
    o.readdirplus = Ops::ReadDirPlus;
    o.releasedir = Ops::ReleaseDir;
    o.open = Ops::Open;
    o.read = Ops::Read;
    o.release = Ops::Release;
    o.ioctl = Ops::Ioctl;
    o.statfs = Ops::StatFs;
    o.getxattr = Ops::GetXattr;
    o.listxattr = Ops::ListXattr;
    o.setattr = Ops::SetAttr;
    o.mknod = Ops::MkNod;
    o.mkdir = Ops::MkDir;
    o.unlink = Ops::Unlink;
    o.rmdir = Ops::Unlink;
    o.symlink = Ops::SymLink;
    o.rename = Ops::Rename;
    o.link = Ops::Link;
    o.write = Ops::Write;
    o.setxattr = Ops::SetXattr;
    o.removexattr = Ops::RemoveXattr;
    o.create = Ops::Create;
    o.fallocate = Ops::Fallocate;
    return o;
  }();
  return ops;
}

}  // namespace granary::fuse
