#include "common/manifest.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/absl_compat.h"
#include "common/chunk_math.h"
#include "common/hash.h"
#include "proto/granary.pb.h"

namespace granary {

void ManifestEntry::ToProto(v1::ManifestEntry* out) const {
  out->set_path(path);
  out->set_type(static_cast<v1::EntryType>(type));
  out->set_size(size);
  out->set_mode(mode);
  out->set_mtime_ns(mtime_ns);
  out->set_symlink_target(symlink_target);
  out->set_etag(etag);
}

absl::StatusOr<ManifestEntry> ManifestEntry::FromProto(const v1::ManifestEntry& entry) {
  if (entry.type() < v1::ENTRY_TYPE_FILE || entry.type() > v1::ENTRY_TYPE_SYMLINK) {
    return absl::InvalidArgumentError(
        absl::StrCat("manifest entry '", entry.path(), "' has unknown type ", entry.type()));
  }
  ManifestEntry out;
  auto clean = CleanDatasetPath(entry.path());
  if (!clean.ok()) return clean.status();
  if (*clean != entry.path()) {
    return absl::InvalidArgumentError(
        absl::StrCat("manifest entry path '", entry.path(), "' is not clean"));
  }
  out.path = entry.path();
  out.type = static_cast<EntryType>(entry.type());
  out.size = entry.size();
  out.mode = entry.mode();
  out.mtime_ns = entry.mtime_ns();
  out.symlink_target = entry.symlink_target();
  out.etag = entry.etag();
  return out;
}

absl::StatusOr<Manifest> Manifest::Build(DatasetIdentity identity,
                                         std::vector<ManifestEntry> entries) {
  if (identity.chunk_size == 0) {
    return absl::InvalidArgumentError("manifest chunk size must be positive");
  }
  std::sort(entries.begin(), entries.end(),
            [](const ManifestEntry& a, const ManifestEntry& b) { return a.path < b.path; });
  Manifest manifest;
  Xxh3Stream hash;
  hash.Update(identity.name);
  hash.UpdateU64(identity.name.size());
  hash.Update(identity.source);
  hash.UpdateU64(identity.source.size());
  hash.UpdateU64(identity.chunk_size);
  for (size_t i = 0; i < entries.size(); ++i) {
    const ManifestEntry& entry = entries[i];
    if (i > 0 && entries[i - 1].path == entry.path) {
      return absl::InvalidArgumentError(absl::StrCat("manifest has path '", entry.path, "' twice"));
    }
    hash.Update(entry.path);
    hash.UpdateU64(entry.path.size());
    hash.UpdateU64(static_cast<uint64_t>(entry.type));
    hash.UpdateU64(entry.size);
    hash.UpdateU64(entry.mode);
    hash.UpdateU64(static_cast<uint64_t>(entry.mtime_ns));
    hash.Update(entry.symlink_target);
    hash.UpdateU64(entry.symlink_target.size());
    hash.Update(entry.etag);
    hash.UpdateU64(entry.etag.size());
    switch (entry.type) {
      case EntryType::kFile:
        // Chunk indexes are 32-bit: a larger file's chunks could not all be
        // named, and its chunk count would wrap.
        if (entry.size > uint64_t{identity.chunk_size} << 32) {
          return absl::InvalidArgumentError(
              absl::StrCat("manifest file '", entry.path, "' of ", entry.size,
                           " bytes has more than 2^32 chunks of ", identity.chunk_size, " bytes"));
        }
        ++manifest.file_count_;
        manifest.total_bytes_ += entry.size;
        manifest.chunk_count_ += ChunkCount(entry.size, identity.chunk_size);
        break;
      case EntryType::kDirectory:
        ++manifest.directory_count_;
        break;
      case EntryType::kSymlink:
        break;
    }
  }
  manifest.version_ = hash.Digest();
  manifest.identity_ = std::move(identity);
  manifest.entries_ = std::move(entries);
  return manifest;
}

std::optional<uint64_t> Manifest::Find(std::string_view path) const {
  auto it = std::lower_bound(
      entries_.begin(), entries_.end(), path,
      [](const ManifestEntry& entry, std::string_view wanted) { return entry.path < wanted; });
  if (it == entries_.end() || it->path != path) return std::nullopt;
  return static_cast<uint64_t>(it - entries_.begin());
}

absl::StatusOr<std::string> CleanDatasetPath(std::string_view path) {
  if (path.find('\0') != std::string_view::npos) {
    return absl::InvalidArgumentError("path contains a NUL byte");
  }
  std::string_view relative = path;
  while (!relative.empty() && relative.front() == '/') relative.remove_prefix(1);
  if (relative.size() != path.size() && !relative.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "path '", AsAbsl(path), "' is absolute; paths are relative to the dataset root"));
  }
  std::string clean;
  for (absl::string_view part : absl::StrSplit(AsAbsl(relative), '/', absl::SkipEmpty())) {
    if (part == "." || part == "..") {
      return absl::InvalidArgumentError(absl::StrCat("path '", AsAbsl(path), "' contains '", part,
                                                     "'; paths may not leave the dataset"));
    }
    if (!clean.empty()) clean.push_back('/');
    clean.append(part.data(), part.size());
  }
  return clean;
}

}  // namespace granary
