// What granaryd's permission check of one read costs with the source's ACLs
// against the same check of owner and mode alone: AccessPolicy::AllowRead for
// a caller on the Unix socket who is not root, of a file three directories
// deep, without ACLs and with an access ACL of three named users and two
// named groups on the file and on every directory above it. The ratio of the
// two, in one run, is what ACLs add to a warm read's check.
#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "cache_server/access/access_policy.h"
#include "common/dataset/manifest.h"
#include "common/dataset/posix_acl.h"

namespace granary {
namespace {

constexpr uint32_t kReader = 1001;

std::string Acl() {
  // version 2; owner rw, users 2000-2002 r, owning group r, groups 3000-3001
  // r, mask r, other r: the kernel's little-endian xattr form.
  struct Ace {
    uint16_t tag, perm;
    uint32_t id;
  };
  const std::vector<Ace> aces = {{0x01, 7, 0},    {0x02, 5, 2000}, {0x02, 5, 2001},
                                 {0x02, 5, 2002}, {0x04, 5, 0},    {0x08, 5, 3000},
                                 {0x08, 5, 3001}, {0x10, 5, 0},    {0x20, 5, 0}};
  std::string out = {2, 0, 0, 0};
  for (const Ace& ace : aces) {
    for (uint32_t value : {uint32_t{ace.tag}, uint32_t{ace.perm}}) {
      out.push_back(static_cast<char>(value & 0xff));
      out.push_back(static_cast<char>(value >> 8));
    }
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((ace.id >> (8 * i)) & 0xff));
  }
  return out;
}

Manifest MakeManifest(bool with_acls) {
  ManifestEntries entries;
  for (const char* path : {"", "a", "a/b", "a/b/c", "a/b/c/file.bin"}) {
    ManifestEntry entry;
    entry.path = path;
    const bool file = std::string(path) == "a/b/c/file.bin";
    entry.type = file ? EntryType::kFile : EntryType::kDirectory;
    entry.mode = file ? (S_IFREG | 0644) : (S_IFDIR | 0755);
    if (with_acls) entry.set_xattrs({{std::string(kAccessAclXattr), Acl()}});
    entries.push_back(std::move(entry));
  }
  absl::StatusOr<Manifest> manifest =
      Manifest::Build({"bench", "/src", 4 << 20}, std::move(entries));
  if (!manifest.ok()) {
    std::fprintf(stderr, "%s\n", manifest.status().ToString().c_str());
    std::abort();
  }
  return *std::move(manifest);
}

void BM_AllowRead(benchmark::State& state) {
  const Manifest manifest = MakeManifest(state.range(0) != 0);
  const uint64_t file_id = *manifest.Find("a/b/c/file.bin");
  const AccessPolicy policy(std::nullopt, "");
  Caller caller;
  caller.channel = Caller::Channel::kUnixSocket;
  caller.credentials = {kReader, kReader, 4242, {100, 200, 300}};
  for (auto _ : state) {
    absl::Status allowed = policy.AllowRead(caller, manifest, file_id);
    benchmark::DoNotOptimize(allowed);
  }
  state.SetLabel(state.range(0) != 0 ? "acls" : "modes");
}
BENCHMARK(BM_AllowRead)->Arg(0)->Arg(1);

}  // namespace
}  // namespace granary

BENCHMARK_MAIN();
