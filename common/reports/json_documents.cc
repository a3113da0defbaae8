#include "common/reports/json_documents.h"

#include <optional>
#include <string>

#include "common/base/utf8.h"
#include "common/dataset/chunk_key.h"
#include "common/jobs/read_origin.h"
#include "common/reports/fraction.h"
#include "common/reports/job_reads_json.h"

namespace granary {
namespace {

nlohmann::json OptionalRatio(std::optional<double> ratio) {
  if (!ratio) return nullptr;
  return *ratio;
}

nlohmann::json FillsJson(const google::protobuf::RepeatedPtrField<v1::FillProgress>& fills) {
  nlohmann::json listed = nlohmann::json::array();
  for (const v1::FillProgress& fill : fills) listed.push_back(FillJson(fill));
  return listed;
}

}  // namespace

nlohmann::json FillJson(const v1::FillProgress& fill) {
  const v1::PrewarmProgress& progress = fill.progress();
  return {
      {"name", fill.name()},
      {"version", FormatVersion(fill.version())},
      {"finished", progress.finished()},
      {"percent", 100 * Fraction(progress.bytes_done(), progress.bytes_total())},
      {"bytes_done", progress.bytes_done()},
      {"bytes_total", progress.bytes_total()},
      {"bytes_per_second", progress.bytes_per_second()},
  };
}

nlohmann::json StatusJson(const v1::StatusResponse& status) {
  nlohmann::json nodes = nlohmann::json::array();
  uint64_t hits = 0;
  uint64_t misses = 0;
  for (const v1::NodeStatus& node : status.nodes()) {
    hits += node.hits();
    misses += node.misses();
    nlohmann::json unloadable = nlohmann::json::array();
    for (const v1::UnloadableDataset& dataset : node.unloadable_datasets()) {
      unloadable.push_back({{"name", dataset.name()},
                            {"version", FormatVersion(dataset.version())},
                            {"error", dataset.error()}});
    }
    nodes.push_back({
        {"node_id", node.node_id()},
        {"group", node.group()},
        {"address", node.address()},
        {"state", node.state()},
        {"capacity_bytes", node.capacity_bytes()},
        {"used_bytes", node.used_bytes()},
        {"chunk_count", node.chunk_count()},
        {"hits", node.hits()},
        {"misses", node.misses()},
        {"hit_ratio", OptionalRatio(HitRatio(node.hits(), node.misses()))},
        {"bytes_from_cache", node.bytes_from_cache()},
        {"bytes_from_source", node.bytes_from_source()},
        {"checksum_failures", node.checksum_failures()},
        {"io_engine", node.io_engine()},
        {"uptime_seconds", node.uptime_seconds()},
        {"fills", FillsJson(node.fills())},
        {"unloadable_datasets", std::move(unloadable)},
    });
  }
  return {
      {"nodes", std::move(nodes)},
      {"dataset_count", status.dataset_count()},
      {"hits", hits},
      {"misses", misses},
      {"hit_ratio", OptionalRatio(HitRatio(hits, misses))},
  };
}

nlohmann::json JobsJson(const v1::ListJobsResponse& jobs) {
  nlohmann::json listed = nlohmann::json::array();
  for (const v1::JobReads& job : jobs.jobs()) listed.push_back(JobReadsJson(job));
  return {
      {"node_id", jobs.node_id()},
      {"group", jobs.group()},
      {"folded_jobs", jobs.folded_jobs()},
      {"jobs", std::move(listed)},
  };
}

nlohmann::json LocateJson(const v1::LocateResponse& locate) {
  nlohmann::json nodes = nlohmann::json::array();
  for (const v1::NodeLocality& node : locate.nodes()) {
    nodes.push_back({
        {"node_id", node.node_id()},
        {"group", node.group()},
        {"cached_bytes", node.cached_bytes()},
        {"node_fraction", node.node_fraction()},
        {"group_fraction", node.group_fraction()},
        {"fill", node.has_fill() ? FillJson(node.fill()) : nlohmann::json()},
        {"age_ms", node.age_ms()},
    });
  }
  nlohmann::json groups = nlohmann::json::array();
  for (const v1::GroupLocality& group : locate.groups()) {
    groups.push_back({
        {"group", group.group()},
        {"cached_bytes", group.cached_bytes()},
        {"fraction", group.fraction()},
    });
  }
  return {
      {"name", locate.name()},
      {"version", FormatVersion(locate.version())},
      {"total_bytes", locate.total_bytes()},
      {"replicas", locate.replicas()},
      {"nodes", std::move(nodes)},
      {"groups", std::move(groups)},
  };
}

nlohmann::json HoldsJson(const v1::ListHoldsResponse& response) {
  nlohmann::json nodes = nlohmann::json::array();
  for (const v1::NodeHolds& node : response.nodes()) {
    nlohmann::json holds = nlohmann::json::array();
    for (const v1::Hold& hold : node.holds()) {
      holds.push_back({{"holder", hold.holder()},
                       {"dataset", hold.dataset()},
                       {"version", FormatVersion(hold.version())},
                       {"bytes", hold.bytes()},
                       {"expires_in_ms", hold.expires_in_ms()}});
    }
    nodes.push_back({{"node_id", node.node_id()},
                     {"group", node.group()},
                     {"share_bytes", node.share_bytes()},
                     {"held_bytes", node.held_bytes()},
                     {"holds", std::move(holds)},
                     {"error", node.error()}});
  }
  return {{"nodes", std::move(nodes)}};
}

namespace {

// JsonName marks a stray byte B as the pair U+FFFF, U+E000 + B (and a real
// U+FFFF, a noncharacter, as U+FFFF twice), which nlohmann::json holds as
// valid UTF-8; FormatJson turns the escaped pairs into surrogates.
constexpr char32_t kMark = 0xffff;
constexpr char32_t kStrayByteBase = 0xe000;

void AppendUtf8(char32_t code, std::string* out) {
  if (code < 0x80) {
    out->push_back(static_cast<char>(code));
  } else if (code < 0x800) {
    out->push_back(static_cast<char>(0xc0 | code >> 6));
    out->push_back(static_cast<char>(0x80 | (code & 0x3f)));
  } else {
    out->push_back(static_cast<char>(0xe0 | code >> 12));
    out->push_back(static_cast<char>(0x80 | (code >> 6 & 0x3f)));
    out->push_back(static_cast<char>(0x80 | (code & 0x3f)));
  }
}

}  // namespace

nlohmann::json JsonName(std::string_view bytes) {
  static const std::string kMarkUtf8 = [] {
    std::string mark;
    AppendUtf8(kMark, &mark);
    return mark;
  }();
  std::string out;
  out.reserve(bytes.size());
  for (size_t i = 0; i < bytes.size();) {
    size_t length = Utf8CharacterLength(bytes.substr(i));
    if (length == 0) {
      out.append(kMarkUtf8);
      AppendUtf8(kStrayByteBase + static_cast<unsigned char>(bytes[i]), &out);
      ++i;
      continue;
    }
    std::string_view character = bytes.substr(i, length);
    if (character == kMarkUtf8) out.append(kMarkUtf8);
    out.append(character);
    i += length;
  }
  return out;
}

std::string FormatJson(const nlohmann::json& document) {
  const std::string text = document.dump(2, ' ', /*ensure_ascii=*/true);
  constexpr std::string_view kEscapedMark = "\\uffff";
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    if (text[i] != '\\') {
      out.push_back(text[i++]);
      continue;
    }
    // An escape: a marked pair becomes one character, others are copied.
    std::string_view rest = std::string_view(text).substr(i);
    if (rest.starts_with(kEscapedMark) && rest.size() >= 12 && rest[6] == '\\') {
      std::string_view second = rest.substr(6, 6);
      if (second == kEscapedMark) {
        out.append(kEscapedMark);
        i += 12;
        continue;
      }
      if (second.starts_with("\\ue0")) {
        out.append("\\udc").append(second.substr(4));
        i += 12;
        continue;
      }
    }
    out.append(rest.substr(0, rest.size() > 1 && rest[1] == 'u' ? 6 : 2));
    i += rest.size() > 1 && rest[1] == 'u' ? 6 : 2;
  }
  return out;
}

}  // namespace granary
