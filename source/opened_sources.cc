#include "source/opened_sources.h"

#include "absl/strings/str_cat.h"
#include "common/base/status.h"
#include "common/source_access/s3_location.h"
#include "common/source_access/source_path.h"
#include "source/posix_source.h"
#include "source/s3_credentials.h"
#include "source/s3_source.h"
#include "source/source_kind.h"

namespace granary {

absl::StatusOr<std::shared_ptr<const Source>> OpenedSources::Open(std::string_view source) {
  switch (KindOf(source)) {
    case SourceKind::kPosix: {
      GRANARY_ASSIGN_OR_RETURN(std::string root, PosixRootOf(source));
      return std::make_shared<const PosixSource>(std::move(root), options_.scan_threads);
    }
    case SourceKind::kS3:
      break;
  }
  GRANARY_ASSIGN_OR_RETURN(S3Location location, ParseS3Source(source));
  const auto endpoint_profile = options_.s3_endpoint_profiles.find(location.endpoint);
  absl::StatusOr<S3Credentials> credentials = FindS3Credentials(
      !location.profile.empty() || endpoint_profile == options_.s3_endpoint_profiles.end()
          ? location.profile
          : endpoint_profile->second);
  if (!credentials.ok()) {
    return absl::Status(
        credentials.status().code(),
        absl::StrCat("S3 endpoint ", location.endpoint, ": ", credentials.status().message()));
  }
  S3RequestSlots* slots;
  {
    MutexLock lock(&mu_);
    std::unique_ptr<S3RequestSlots>& kept = slots_[location.endpoint];
    if (!kept) kept = std::make_unique<S3RequestSlots>(options_.s3_requests_per_endpoint);
    slots = kept.get();
  }
  return std::make_shared<const S3Source>(
      std::make_unique<S3Client>(std::move(location), *std::move(credentials), slots, options_.s3));
}

absl::StatusOr<std::shared_ptr<const Source>> OpenedSources::Reopen(std::string_view source) {
  GRANARY_ASSIGN_OR_RETURN(std::shared_ptr<const Source> opened, Open(source));
  MutexLock lock(&mu_);
  kept_.insert_or_assign(std::string(source), opened);
  return opened;
}

absl::StatusOr<std::shared_ptr<const Source>> OpenedSources::Get(std::string_view source) {
  {
    MutexLock lock(&mu_);
    auto kept = kept_.find(source);
    if (kept != kept_.end()) return kept->second;
  }
  GRANARY_ASSIGN_OR_RETURN(std::shared_ptr<const Source> opened, Open(source));
  MutexLock lock(&mu_);
  return kept_.emplace(std::string(source), std::move(opened)).first->second;
}

}  // namespace granary
