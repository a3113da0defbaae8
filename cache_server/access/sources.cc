#include "cache_server/access/sources.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/absl_compat.h"
#include "common/base/printable.h"
#include "common/base/status.h"
#include "common/source_access/s3_location.h"
#include "source/source_kind.h"

namespace granary {

absl::StatusOr<std::unique_ptr<Sources>> Sources::Create(
    const SourceRoots* roots, const std::vector<std::string>& s3_endpoints, Options options) {
  std::vector<std::string> canonical;
  for (const std::string& endpoint : s3_endpoints) {
    absl::StatusOr<std::string> one = CanonicalS3Endpoint(endpoint);
    if (!one.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("s3_endpoints: ", one.status().message()));
    }
    canonical.push_back(*std::move(one));
  }
  std::map<std::string, std::string> profiles;
  for (const auto& [endpoint, profile] : options.s3_endpoint_profiles) {
    absl::StatusOr<std::string> one = CanonicalS3Endpoint(endpoint);
    if (!one.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("s3_endpoint_profiles: ", one.status().message()));
    }
    if (std::find(canonical.begin(), canonical.end(), *one) == canonical.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "s3_endpoint_profiles: endpoint ", endpoint,
          " is not one granaryd may read (s3_endpoints: ", absl::StrJoin(canonical, ", "), ")"));
    }
    profiles[*std::move(one)] = profile;
  }
  options.s3_endpoint_profiles = std::move(profiles);
  return std::unique_ptr<Sources>(new Sources(roots, std::move(canonical), std::move(options)));
}

absl::StatusOr<std::string> Sources::Canonical(std::string_view source) const {
  return CanonicalSource(source);
}

absl::Status Sources::Check(std::string_view source) const {
  switch (KindOf(source)) {
    case SourceKind::kPosix:
      return roots_->Confine(source).status();
    case SourceKind::kS3:
      break;
  }
  GRANARY_ASSIGN_OR_RETURN(S3Location location, ParseS3Source(source));
  for (const std::string& endpoint : s3_endpoints_) {
    if (endpoint == location.endpoint) return absl::OkStatus();
  }
  if (s3_endpoints_.empty()) {
    return absl::PermissionDeniedError(absl::StrCat(
        "this granaryd has no S3 endpoints configured, so no S3 dataset can be registered "
        "(endpoint ",
        location.endpoint,
        "); an administrator lists the endpoints datasets may come from in granaryd's config "
        "(s3_endpoints) or with --s3-endpoint"));
  }
  return absl::PermissionDeniedError(
      absl::StrCat("S3 endpoint ", location.endpoint, " is not one of this granaryd's (",
                   absl::StrJoin(s3_endpoints_, ", "),
                   "); an administrator adds endpoints in granaryd's config (s3_endpoints)"));
}

absl::StatusOr<std::shared_ptr<const Source>> Sources::OpenToScan(std::string_view source) {
  switch (KindOf(source)) {
    case SourceKind::kPosix: {
      // Confining a POSIX source beneath the roots is its check (Check()),
      // made once: the scan reads the directory confining resolved it to.
      GRANARY_ASSIGN_OR_RETURN(std::string root, roots_->Confine(source));
      return opened_.Reopen(root);
    }
    case SourceKind::kS3:
      break;
  }
  GRANARY_RETURN_IF_ERROR(Check(source));
  return opened_.Reopen(source);
}

absl::StatusOr<std::shared_ptr<const Source>> Sources::OpenToRead(std::string_view source) {
  return opened_.Get(source);
}

}  // namespace granary
