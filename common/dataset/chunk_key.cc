#include "common/dataset/chunk_key.h"

#include <cstdio>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/base/absl_compat.h"
#include "common/base/big_endian.h"
#include "proto/granary.pb.h"

namespace granary {

std::string ChunkKey::Encode() const {
  char out[kEncodedSize];
  EncodeTo(out);
  return std::string(out, kEncodedSize);
}

void ChunkKey::EncodeTo(char (&out)[kEncodedSize]) const {
  PutBigEndian(dataset_version, 8, out);
  PutBigEndian(file_id, 8, out + 8);
  PutBigEndian(chunk_index, 4, out + 16);
}

absl::StatusOr<ChunkKey> ChunkKey::Decode(std::string_view encoded) {
  if (encoded.size() != kEncodedSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunk key must be ", kEncodedSize, " bytes, got ", encoded.size()));
  }
  ChunkKey key;
  key.dataset_version = ReadBigEndian(encoded.substr(0, 8), 8);
  key.file_id = ReadBigEndian(encoded.substr(8, 8), 8);
  key.chunk_index = static_cast<uint32_t>(ReadBigEndian(encoded.substr(16, 4), 4));
  return key;
}

std::string ChunkKey::VersionPrefix(uint64_t dataset_version) {
  char out[8];
  PutBigEndian(dataset_version, 8, out);
  return std::string(out, sizeof(out));
}

void ChunkKey::ToProto(v1::ChunkKey* out) const {
  out->set_dataset_version(dataset_version);
  out->set_file_id(file_id);
  out->set_chunk_index(chunk_index);
}

ChunkKey ChunkKey::FromProto(const v1::ChunkKey& key) {
  return {key.dataset_version(), key.file_id(), key.chunk_index()};
}

std::string ChunkKey::ToString() const {
  return absl::StrCat("v", FormatVersion(dataset_version), "/f", file_id, "/c", chunk_index);
}

std::string FormatVersion(uint64_t version) { return absl::StrFormat("%016x", version); }

absl::StatusOr<uint64_t> ParseVersion(std::string_view text) {
  uint64_t version = 0;
  if (text.empty() || text.size() > 16 || !absl::SimpleHexAtoi(AsAbsl(text), &version)) {
    return absl::InvalidArgumentError(
        absl::StrCat("dataset version must be up to 16 hex digits, got '", AsAbsl(text), "'"));
  }
  return version;
}

}  // namespace granary
