#include "source/s3_tree.h"

#include <sys/stat.h>

#include <algorithm>
#include <map>
#include <optional>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/base/absl_compat.h"

namespace granary {
namespace {

constexpr size_t kMaxNameBytes = 255;
constexpr size_t kMaxPathBytes = 4095;

// Why `path` cannot be a path of the tree, or nullopt when it can.
std::optional<std::string> WhyNotAPath(std::string_view path) {
  if (path.size() > kMaxPathBytes) {
    return absl::StrCat("a path of ", path.size(), " bytes is over the ", kMaxPathBytes,
                        " a POSIX path may have");
  }
  for (absl::string_view name_view : absl::StrSplit(AsAbsl(path), '/')) {
    const std::string_view name = AsStd(name_view);
    if (name.empty()) return "an empty path component ('//' or a leading '/')";
    if (name == "." || name == "..") return "a '.' or '..' path component";
    if (name.find('\0') != std::string_view::npos) return "a NUL byte";
    if (name.size() > kMaxNameBytes) {
      return absl::StrCat("a name of ", name.size(), " bytes is over the ", kMaxNameBytes,
                          " a POSIX name may have");
    }
  }
  return std::nullopt;
}

void AddAncestors(std::string_view path, int64_t mtime_ns, std::map<std::string, int64_t>* dirs) {
  for (size_t slash = path.find('/'); slash != std::string_view::npos;
       slash = path.find('/', slash + 1)) {
    int64_t& newest = (*dirs)[std::string(path.substr(0, slash))];
    newest = std::max(newest, mtime_ns);
  }
}

}  // namespace

ScannedTree TreeOfObjects(const std::vector<S3Object>& objects, const S3Location& location) {
  ScannedTree tree;
  std::map<std::string, int64_t> dirs;  // Path to the newest mtime beneath it.
  std::map<std::string, const S3Object*> files;
  int64_t newest = 0;
  for (const S3Object& object : objects) {
    std::string_view key = object.key;
    if (key.substr(0, location.prefix.size()) != location.prefix) {
      tree.skipped.Add(object.key, "listed although it is not under the prefix");
      continue;
    }
    key.remove_prefix(location.prefix.size());
    if (key.empty()) continue;  // The prefix's own directory marker.
    const bool marker = key.back() == '/';
    if (marker) key.remove_suffix(1);
    if (std::optional<std::string> why = WhyNotAPath(key)) {
      tree.skipped.Add(object.key, absl::StrCat("the key cannot be a POSIX path: ", *why));
      continue;
    }
    newest = std::max(newest, object.last_modified_ns);
    AddAncestors(key, object.last_modified_ns, &dirs);
    if (marker) {
      int64_t& mtime = dirs[std::string(key)];
      mtime = std::max(mtime, object.last_modified_ns);
    } else {
      files.emplace(std::string(key), &object);
    }
  }
  const uint32_t gid = location.readers_gid.value_or(0);
  const uint32_t file_mode = S_IFREG | (location.readers_gid ? 0440 : 0400);
  const uint32_t dir_mode = S_IFDIR | (location.readers_gid ? 0550 : 0500);
  auto add_directory = [&](std::string path, int64_t mtime_ns) {
    ManifestEntry& entry = tree.entries.emplace_back();
    entry.path = std::move(path);
    entry.type = EntryType::kDirectory;
    entry.mode = dir_mode;
    entry.gid = gid;
    entry.mtime_ns = entry.ctime_ns = mtime_ns;
    entry.nlink = 2;
  };
  add_directory("", newest);
  for (const auto& [path, mtime_ns] : dirs) add_directory(path, mtime_ns);
  for (const auto& [path, object] : files) {
    if (dirs.contains(path)) {
      tree.skipped.Add(object->key,
                       "the key is both an object and the prefix of other keys; the directory "
                       "is kept");
      continue;
    }
    ManifestEntry& entry = tree.entries.emplace_back();
    entry.path = path;
    entry.type = EntryType::kFile;
    entry.size = object->size;
    entry.mode = file_mode;
    entry.gid = gid;
    entry.mtime_ns = entry.ctime_ns = object->last_modified_ns;
    entry.set_etag(object->etag);
  }
  return tree;
}

}  // namespace granary
