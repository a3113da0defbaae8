// granary dataset add|ls|show|refresh|rm: the dataset catalog of granaryd.
#include <grp.h>

#include <charconv>
#include <filesystem>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/commands.h"
#include "cli/format.h"
#include "cli/json_output.h"
#include "cli/server_connection.h"
#include "cli/table.h"
#include "common/base/absl_compat.h"
#include "common/base/printable.h"
#include "common/base/size.h"
#include "common/base/status.h"
#include "common/dataset/chunk_key.h"
#include "common/dataset/chunk_math.h"
#include "common/source_access/s3_location.h"
#include "source/source_kind.h"

namespace granary::cli {
namespace {

struct AddOptions {
  std::string name;
  std::string source;
  std::string chunk_size;
  uint32_t replicas = 1;
  std::string fill;
  // Of an s3:// source; each overrides the same parameter in SOURCE.
  std::optional<std::string> endpoint;
  std::optional<std::string> region;
  std::optional<std::string> profile;
  std::optional<std::string> addressing;
  std::optional<std::string> readers_group;
  bool json = false;
};

struct NamedOptions {
  std::string name;
  bool json = false;
};

// granaryd resolves a relative path against its own working directory, so a
// bare relative path is made absolute here, where the user meant it.
std::string AbsoluteSource(const std::string& source) {
  if (absl::StrContains(source, "://")) return source;
  return std::filesystem::absolute(source).lexically_normal().string();
}

absl::StatusOr<uint32_t> GroupIdOf(const std::string& group) {
  uint32_t gid = 0;
  auto [end, error] = std::from_chars(group.data(), group.data() + group.size(), gid);
  if (!group.empty() && error == std::errc() && end == group.data() + group.size()) return gid;
  struct group entry;
  struct group* found = nullptr;
  std::vector<char> buffer(16384);
  if (getgrnam_r(group.c_str(), &entry, buffer.data(), buffer.size(), &found) != 0 ||
      found == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("--readers-group: no group '", Printable(group), "' on this host"));
  }
  return found->gr_gid;
}

// The source to register: a path made absolute, or an s3:// source in its
// canonical form with the S3 flags applied.
absl::StatusOr<std::string> SourceToRegister(const AddOptions& options) {
  const bool s3_flags = options.endpoint || options.region || options.profile ||
                        options.addressing || options.readers_group;
  if (KindOf(options.source) == SourceKind::kPosix) {
    if (s3_flags) {
      return absl::InvalidArgumentError(
          absl::StrCat("--endpoint, --region, --profile, --addressing and --readers-group are for "
                       "s3:// sources, not '",
                       Printable(options.source), "'"));
    }
    return AbsoluteSource(options.source);
  }
  std::string source = options.source;
  if (options.endpoint) {
    GRANARY_ASSIGN_OR_RETURN(std::string endpoint, CanonicalS3Endpoint(*options.endpoint));
    // Parsed once more below, with the other parameters.
    absl::StrAppend(&source, absl::StrContains(source, "?") ? "&" : "?",
                    "endpoint=", S3UriEncode(endpoint, false));
  }
  GRANARY_ASSIGN_OR_RETURN(S3Location location, ParseS3Source(source));
  if (options.region) {
    location.region = *options.region;
    if (!options.endpoint && !absl::StrContains(options.source, "endpoint=")) {
      location.endpoint = absl::StrCat("https://s3.", *options.region, ".amazonaws.com");
    }
  }
  if (options.profile) location.profile = *options.profile;
  if (options.addressing) {
    location.addressing =
        *options.addressing == "virtual" ? S3Addressing::kVirtualHosted : S3Addressing::kPath;
  }
  if (options.readers_group) {
    GRANARY_ASSIGN_OR_RETURN(location.readers_gid, GroupIdOf(*options.readers_group));
  }
  // Formatted and parsed again, so a bad region or profile is refused here.
  std::string canonical = FormatS3Source(location);
  GRANARY_RETURN_IF_ERROR(ParseS3Source(canonical).status());
  return canonical;
}

absl::StatusOr<uint32_t> ParseChunkSize(const std::string& text) {
  if (text.empty()) return 0;  // The server's default.
  GRANARY_ASSIGN_OR_RETURN(uint64_t bytes, ParseSize(text));
  if (bytes < kMinChunkSize || bytes > kMaxChunkSize) {
    return absl::OutOfRangeError(absl::StrCat("chunk size '", text, "' is out of range (",
                                              FormatSize(kMinChunkSize), " to ",
                                              FormatSize(kMaxChunkSize), ")"));
  }
  return static_cast<uint32_t>(bytes);
}

std::string CachedText(const v1::DatasetInfo& dataset) {
  return absl::StrCat(FormatSize(dataset.cached_bytes()), " (",
                      FormatPercent(Fraction(dataset.cached_bytes(), dataset.total_bytes())), ")");
}

void PrintDatasetDetails(const v1::DatasetInfo& dataset) {
  std::vector<std::string> older;
  for (uint64_t version : dataset.older_versions()) older.push_back(FormatVersion(version));
  auto field = [](std::string_view label, std::string_view value) {
    std::cout << absl::StreamFormat("%-15s %s\n", AsAbsl(label), AsAbsl(value));
  };
  field("name:", dataset.name());
  field("source:", DisplayName(dataset.source()));
  field("version:", FormatVersion(dataset.version()));
  field("registered:", FormatUnixMs(dataset.created_unix_ms()));
  field("files:", absl::StrCat(dataset.file_count()));
  field("directories:", absl::StrCat(dataset.directory_count()));
  field("size:",
        absl::StrCat(FormatSize(dataset.total_bytes()), " (", dataset.total_bytes(), " bytes)"));
  field("chunk size:", FormatSize(dataset.chunk_size()));
  field("chunks:", absl::StrCat(dataset.chunk_count()));
  field("replicas:", absl::StrCat(dataset.replicas(), " per cache group"));
  field("fill:", dataset.fill() == v1::FILL_DEFAULT
                     ? "default (each node's own: `fill` in its config)"
                     : FillPolicyName(dataset.fill()));
  field("cached here:", CachedText(dataset));
  field("older versions:", older.empty() ? "none" : absl::StrJoin(older, ", "));
  field("skipped:", dataset.skipped_count() == 0
                        ? "nothing"
                        : absl::StrCat(dataset.skipped_count(), " entries of the source"));
  for (const v1::SkippedEntry& entry : dataset.skipped()) {
    std::cout << "  " << DisplayName(entry.path()) << ": " << entry.reason() << "\n";
  }
  if (dataset.skipped_count() > static_cast<uint64_t>(dataset.skipped_size())) {
    std::cout << "  and " << dataset.skipped_count() - dataset.skipped_size() << " more\n";
  }
  if (dataset.owner_only_count() > 0) {
    field("owner only:", absl::StrCat(dataset.owner_only_count(),
                                      " entries whose ACLs (NFSv4 or other) Granary cannot "
                                      "evaluate: their owner and root alone read them"));
  }
}

absl::Status RunAdd(const GlobalOptions& global, const AddOptions& options) {
  GRANARY_ASSIGN_OR_RETURN(uint32_t chunk_size, ParseChunkSize(options.chunk_size));
  GRANARY_ASSIGN_OR_RETURN(ServerConnection server,
                           ServerConnection::Open(global.server, global.token_file));
  v1::AddDatasetRequest request;
  request.set_name(options.name);
  GRANARY_ASSIGN_OR_RETURN(std::string source, SourceToRegister(options));
  request.set_source(source);
  request.set_chunk_size(chunk_size);
  request.set_replicas(options.replicas);
  request.set_fill(options.fill == "on-read" ? v1::FILL_ON_READ
                   : options.fill == "none"  ? v1::FILL_NONE
                                             : v1::FILL_DEFAULT);
  GRANARY_ASSIGN_OR_RETURN(v1::DatasetInfo dataset,
                           server.Call(&v1::Granary::Stub::AddDataset, request));
  if (options.json) {
    PrintJson(DatasetJson(dataset));
  } else {
    std::cout << absl::StreamFormat(
        "registered dataset '%s': %d files, %d directories, %s in %d chunks of %s, version %s\n",
        dataset.name(), dataset.file_count(), dataset.directory_count(),
        FormatSize(dataset.total_bytes()), dataset.chunk_count(), FormatSize(dataset.chunk_size()),
        FormatVersion(dataset.version()));
  }
  return absl::OkStatus();
}

absl::Status RunList(const GlobalOptions& global, bool json) {
  GRANARY_ASSIGN_OR_RETURN(ServerConnection server,
                           ServerConnection::Open(global.server, global.token_file));
  GRANARY_ASSIGN_OR_RETURN(v1::ListDatasetsResponse response,
                           server.Call(&v1::Granary::Stub::ListDatasets));
  if (json) {
    PrintJson(DatasetListJson(response));
    return absl::OkStatus();
  }
  if (response.datasets().empty()) {
    std::cout << "no datasets; register one with: granary dataset add NAME SOURCE\n";
    return absl::OkStatus();
  }
  using Align = Table::Align;
  Table table({{"NAME"},
               {"VERSION"},
               {"FILES", Align::kRight},
               {"SIZE", Align::kRight},
               {"CACHED", Align::kRight},
               {"SOURCE"}});
  for (const v1::DatasetInfo& dataset : response.datasets()) {
    table.AddRow({dataset.name(), FormatVersion(dataset.version()),
                  absl::StrCat(dataset.file_count()), FormatSize(dataset.total_bytes()),
                  FormatPercent(Fraction(dataset.cached_bytes(), dataset.total_bytes())),
                  DisplayName(dataset.source())});
  }
  std::cout << table.Render();
  return absl::OkStatus();
}

absl::StatusOr<v1::DatasetInfo> GetDataset(const ServerConnection& server,
                                           const std::string& name) {
  v1::GetDatasetRequest request;
  request.set_name(name);
  return server.Call(&v1::Granary::Stub::GetDataset, request);
}

absl::Status RunShow(const GlobalOptions& global, const NamedOptions& options) {
  GRANARY_ASSIGN_OR_RETURN(ServerConnection server,
                           ServerConnection::Open(global.server, global.token_file));
  GRANARY_ASSIGN_OR_RETURN(v1::DatasetInfo dataset, GetDataset(server, options.name));
  if (options.json) {
    PrintJson(DatasetJson(dataset));
  } else {
    PrintDatasetDetails(dataset);
  }
  return absl::OkStatus();
}

absl::Status RunRefresh(const GlobalOptions& global, const NamedOptions& options) {
  GRANARY_ASSIGN_OR_RETURN(ServerConnection server,
                           ServerConnection::Open(global.server, global.token_file));
  // Asked first only to tell the user whether the source changed.
  GRANARY_ASSIGN_OR_RETURN(v1::DatasetInfo before, GetDataset(server, options.name));
  v1::RefreshDatasetRequest request;
  request.set_name(options.name);
  GRANARY_ASSIGN_OR_RETURN(v1::DatasetInfo after,
                           server.Call(&v1::Granary::Stub::RefreshDataset, request));
  bool changed = before.version() != after.version();
  if (options.json) {
    nlohmann::json document = DatasetJson(after);
    document["changed"] = changed;
    document["previous_version"] = FormatVersion(before.version());
    PrintJson(document);
  } else if (changed) {
    std::cout << absl::StreamFormat(
        "refreshed dataset '%s': version %s -> %s, %d files, %s. Mounts show the new version; "
        "files opened before keep reading version %s while open, from the cache or else from "
        "the source (a file changed there since reads as ESTALE), and it is released once none "
        "of its files is open and the grace period has passed\n",
        after.name(), FormatVersion(before.version()), FormatVersion(after.version()),
        after.file_count(), FormatSize(after.total_bytes()), FormatVersion(before.version()));
  } else {
    std::cout << absl::StreamFormat("dataset '%s' is unchanged: version %s\n", after.name(),
                                    FormatVersion(after.version()));
  }
  return absl::OkStatus();
}

absl::Status RunRemove(const GlobalOptions& global, const NamedOptions& options) {
  GRANARY_ASSIGN_OR_RETURN(ServerConnection server,
                           ServerConnection::Open(global.server, global.token_file));
  v1::RemoveDatasetRequest request;
  request.set_name(options.name);
  GRANARY_ASSIGN_OR_RETURN(v1::RemoveDatasetResponse response,
                           server.Call(&v1::Granary::Stub::RemoveDataset, request));
  if (options.json) {
    PrintJson(RemovedDatasetJson(options.name, response));
  } else {
    std::cout << absl::StreamFormat("removed dataset '%s', freed %s\n", options.name,
                                    FormatSize(response.freed_bytes()));
  }
  return absl::OkStatus();
}

// Registers `name` under `parent` taking NAME and --json, to run `run`.
void AddNamedCommand(CLI::App& parent, const std::string& name, const std::string& description,
                     const GlobalOptions& global, Action& action,
                     absl::Status (*run)(const GlobalOptions&, const NamedOptions&)) {
  auto options = std::make_shared<NamedOptions>();
  CLI::App* command = parent.add_subcommand(name, description);
  command->add_option("NAME", options->name, "Dataset name")->required();
  command->add_flag("--json", options->json, "Print one JSON document");
  command->callback([&global, &action, options, run] {
    action = [&global, options, run] { return run(global, *options); };
  });
}

}  // namespace

void AddDatasetCommands(CLI::App& app, const GlobalOptions& global, Action& action) {
  CLI::App* dataset =
      app.add_subcommand("dataset", "Register, list, show, refresh and remove datasets");
  dataset->require_subcommand(1);

  auto add_options = std::make_shared<AddOptions>();
  CLI::App* add = dataset->add_subcommand("add", "Scan a source and register it as a dataset");
  add->add_option("NAME", add_options->name, "Dataset name")->required();
  add->add_option("SOURCE", add_options->source,
                  "A directory (posix:///path or a bare path) or s3://BUCKET[/PREFIX]")
      ->required();
  add->add_option("--endpoint", add_options->endpoint,
                  "S3: the endpoint, http(s)://host[:port] (default: AWS's for the region)");
  add->add_option("--region", add_options->region, "S3: the region to sign for (us-east-1)");
  add->add_option("--profile", add_options->profile,
                  "S3: the credentials profile granaryd signs with (default: granaryd's "
                  "AWS_ACCESS_KEY_ID, else AWS_PROFILE, else default)");
  add->add_option("--addressing", add_options->addressing,
                  "S3: path (host/bucket/key) or virtual (bucket.host/key); default path, "
                  "virtual for AWS")
      ->check(CLI::IsMember({"path", "virtual"}));
  add->add_option("--readers-group", add_options->readers_group,
                  "S3: the group (name or id) that may read the objects through Granary "
                  "(default: root alone)");
  add->add_option("--chunk-size", add_options->chunk_size,
                  "Chunk size, 1MiB to 64MiB (default 4MiB)");
  add->add_option("--replicas", add_options->replicas,
                  "Copies of each chunk in every cache group, 1 to 8 (default 1)")
      ->check(CLI::Range(1, 8));
  add->add_option("--fill", add_options->fill,
                  "on-read: a cold read starts filling the rest of the dataset in the "
                  "background; none: only what is read or prewarmed is cached (default: each "
                  "node's own, on-read unless configured)")
      ->check(CLI::IsMember({"on-read", "none"}));
  add->add_flag("--json", add_options->json, "Print one JSON document");
  add->callback([&global, &action, add_options] {
    action = [&global, add_options] { return RunAdd(global, *add_options); };
  });

  auto list_json = std::make_shared<bool>(false);
  CLI::App* list = dataset->add_subcommand("ls", "List datasets");
  list->add_flag("--json", *list_json, "Print one JSON document");
  list->callback([&global, &action, list_json] {
    action = [&global, list_json] { return RunList(global, *list_json); };
  });

  AddNamedCommand(*dataset, "show", "Show one dataset", global, action, RunShow);
  AddNamedCommand(*dataset, "refresh", "Rescan a dataset's source into a new version", global,
                  action, RunRefresh);
  AddNamedCommand(*dataset, "rm", "Remove a dataset and its cached chunks", global, action,
                  RunRemove);
}

}  // namespace granary::cli
