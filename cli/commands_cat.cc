// granary cat NAME/PATH: writes one file of a dataset to standard output,
// read through the cache (hits from NVMe, misses read through from the source)
// as granary-fuse reads it: the manifest from the server, each chunk from its
// owner in that server's cache group.
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "cli/commands.h"
#include "cli/format.h"
#include "cli/server_connection.h"
#include "client/cluster_reader.h"
#include "client/dataset_client.h"
#include "common/base/status.h"
#include "common/dataset/manifest.h"
#include "common/net/cluster_token.h"
#include "common/net/server_address.h"

namespace granary::cli {
namespace {

// As many hops as Linux follows before ELOOP.
constexpr int kMaxSymlinkHops = 40;

struct CatOptions {
  std::string target;  // NAME/PATH
};

// The file id `path` names in `manifest`, following symlinks (which the
// manifest only holds when they point inside the dataset).
absl::StatusOr<uint64_t> FindFile(const DatasetSnapshot& snapshot, const std::string& path) {
  const std::string& name = snapshot.info.name();
  GRANARY_ASSIGN_OR_RETURN(std::string current, CleanDatasetPath(path));
  for (int hop = 0; hop <= kMaxSymlinkHops; ++hop) {
    std::optional<uint64_t> id = snapshot.manifest.Find(current);
    if (!id) {
      return absl::NotFoundError(
          absl::StrCat("no file '", DisplayName(current), "' in dataset '", name, "'"));
    }
    const ManifestEntry& entry = snapshot.manifest.entries()[*id];
    switch (entry.type) {
      case EntryType::kFile:
        return snapshot.manifest.CanonicalFileId(*id);
      case EntryType::kDirectory:
        return absl::InvalidArgumentError(
            absl::StrCat("'", DisplayName(current), "' in dataset '", name, "' is a directory"));
      case EntryType::kSymlink: {
        // Resolved under a stand-in root "/" so that ".." cannot climb above it.
        std::filesystem::path link_dir = std::filesystem::path("/" + current).parent_path();
        std::string resolved = (link_dir / entry.symlink_target()).lexically_normal().string();
        GRANARY_ASSIGN_OR_RETURN(current, CleanDatasetPath(resolved.substr(1)));
        break;
      }
    }
  }
  return absl::InvalidArgumentError(absl::StrCat("too many levels of symlinks at '",
                                                 DisplayName(path), "' in dataset '", name, "'"));
}

absl::Status WriteAll(std::span<const char> bytes) {
  if (std::fwrite(bytes.data(), 1, bytes.size(), stdout) != bytes.size()) {
    return ErrnoStatus(errno, "writing to standard output");
  }
  return absl::OkStatus();
}

absl::Status RunCat(const GlobalOptions& global, const CatOptions& options) {
  size_t slash = options.target.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == options.target.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", options.target, "' is not NAME/PATH (a dataset and a file in it)"));
  }
  std::string name = options.target.substr(0, slash);
  std::string path = options.target.substr(slash + 1);
  std::string address = ResolveServerAddress(global.server);
  DatasetClient::Options client_options;
  GRANARY_ASSIGN_OR_RETURN(client_options.cluster_token, ResolveClusterToken(global.token_file));
  GRANARY_ASSIGN_OR_RETURN(std::unique_ptr<DatasetClient> client,
                           DatasetClient::Connect(address, client_options));
  absl::StatusOr<DatasetSnapshot> snapshot = client->GetManifest(name);
  if (!snapshot.ok()) return NameServerInError(snapshot.status(), address);
  GRANARY_ASSIGN_OR_RETURN(uint64_t file_id, FindFile(*snapshot, path));
  ClusterReader servers(client.get(), {.client = client_options, .watch = {}});

  std::vector<char> buffer(snapshot->manifest.chunk_size());
  uint64_t size = snapshot->manifest.entries()[file_id].size;
  for (uint64_t offset = 0; offset < size;) {
    absl::StatusOr<size_t> read = servers.ReadFile(*snapshot, file_id, offset, buffer);
    if (!read.ok()) return NameServerInError(read.status(), address);
    if (*read == 0) {
      return absl::DataLossError(absl::StrCat("granaryd at ", address, " returned no bytes of '",
                                              DisplayName(path), "' at offset ", offset, " of ",
                                              size));
    }
    GRANARY_RETURN_IF_ERROR(WriteAll(std::span(buffer).first(*read)));
    offset += *read;
  }
  if (std::fflush(stdout) != 0) return ErrnoStatus(errno, "writing to standard output");
  return absl::OkStatus();
}

}  // namespace

void AddCatCommand(CLI::App& app, const GlobalOptions& global, Action& action) {
  auto options = std::make_shared<CatOptions>();
  CLI::App* cat =
      app.add_subcommand("cat", "Write a file of a dataset to standard output, through the cache");
  cat->add_option("NAME/PATH", options->target, "Dataset name and file path")->required();
  cat->callback([&global, &action, options] {
    action = [&global, options] { return RunCat(global, *options); };
  });
}

}  // namespace granary::cli
