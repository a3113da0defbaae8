#include "cache_server/read_path/read_permission.h"

#include "cache_server/catalog/current_entry.h"
#include "common/base/status.h"

namespace granary {

absl::Status AllowFileRead(const AccessPolicy& policy, Catalog& catalog, const Caller& caller,
                           const std::shared_ptr<const Manifest>& manifest, uint64_t file_id) {
  if (!AccessPolicy::ChecksFiles(caller)) return absl::OkStatus();
  GRANARY_RETURN_IF_ERROR(policy.AllowRead(caller, *manifest, file_id));
  GRANARY_ASSIGN_OR_RETURN(CurrentEntry current, FindCurrentEntry(catalog, manifest, file_id));
  if (current.manifest == manifest) return absl::OkStatus();
  return policy.AllowRead(caller, *current.manifest, current.file_id);
}

}  // namespace granary
