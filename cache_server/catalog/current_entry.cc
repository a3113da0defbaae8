#include "cache_server/catalog/current_entry.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/printable.h"
#include "common/base/status.h"
#include "common/dataset/chunk_key.h"

namespace granary {

absl::StatusOr<CurrentEntry> FindCurrentEntry(Catalog& catalog,
                                              std::shared_ptr<const Manifest> manifest,
                                              uint64_t file_id) {
  if (file_id >= manifest->entries().size()) {
    return absl::NotFoundError(absl::StrCat("dataset version has no file ", file_id));
  }
  const std::string& name = manifest->identity().name;
  GRANARY_ASSIGN_OR_RETURN(uint64_t current, catalog.CurrentVersionOf(name));
  if (current == manifest->version()) return CurrentEntry{std::move(manifest), file_id};
  GRANARY_ASSIGN_OR_RETURN(std::shared_ptr<const Manifest> newest, catalog.GetManifest(current));
  const std::string& path = manifest->entries()[file_id].path;
  std::optional<uint64_t> id = newest->Find(path);
  if (!id || newest->entries()[*id].type != EntryType::kFile) {
    return absl::PermissionDeniedError(
        absl::StrCat("'", Printable(path), "' of version ", FormatVersion(manifest->version()),
                     " of dataset '", name, "' is no longer a file in its source (current version ",
                     FormatVersion(current), ")"));
  }
  return CurrentEntry{std::move(newest), *id};
}

}  // namespace granary
