#!/usr/bin/env bash
# Checks the locking of Granary's own code with clang's thread-safety
# analysis: every translation unit of the products (not tests, benchmarks or
# generated code), compiled by clang++ with the flags the build gave it, for
# syntax and analysis only, with -Wthread-safety as an error. GCC ignores the
# ABSL_GUARDED_BY / ABSL_EXCLUSIVE_LOCKS_REQUIRED annotations; this is what
# makes them hold. Reads the compile commands of GRANARY_BUILD_DIR (default
# build/), so run scripts/build.sh first.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build_dir="${GRANARY_BUILD_DIR:-$root/build}"
commands="$build_dir/compile_commands.json"
if [[ ! -f "$commands" ]]; then
  echo "check-thread-safety: $commands is missing; run scripts/build.sh first" >&2
  exit 2
fi
clang="${CLANGXX:-clang++}"
if ! command -v "$clang" >/dev/null; then
  echo "check-thread-safety: $clang not found (scripts/install-deps.sh installs clang)" >&2
  exit 2
fi

# One line per translation unit: the directory, then the clang command.
python3 - "$root" "$commands" "$clang" >"$build_dir/thread-safety-commands" <<'EOF'
import json, shlex, sys
root, commands, clang = sys.argv[1:4]
products = (
    "common/", "client/", "source/", "cache_server/", "fuse_client/", "cli/", "scheduler_hooks/", "csi/",
    "python/")
for entry in json.load(open(commands)):
    source = entry["file"]
    if not source.startswith(root + "/"):
        continue
    relative = source[len(root) + 1:]
    if not relative.startswith(products):
        continue
    argv = shlex.split(entry["command"])
    kept = [clang]
    skip_next = False
    for arg in argv[1:]:
        if skip_next:
            skip_next = False
            continue
        if arg in ("-o", "-c"):
            skip_next = arg == "-o"
            continue
        if arg == source or arg.startswith("-W"):
            continue
        # clang 14 knows C++23 by its draft name.
        kept.append("-std=c++2b" if arg == "-std=c++23" else arg)
    kept += ["-fsyntax-only", "-Wthread-safety", "-Werror=thread-safety", source]
    print(entry["directory"], shlex.join(kept))
EOF

count=$(wc -l <"$build_dir/thread-safety-commands")
failures="$build_dir/thread-safety-failures"
: >"$failures"
# Each unit's diagnostics are printed whole, after it finishes.
xargs -P "$(nproc)" -L 1 -d '\n' bash -c '
  directory="${0%% *}"; command="${0#* }"
  if ! output=$(cd "$directory" && eval "$command" 2>&1); then
    printf "%s\n" "$output" >&2
    echo "${command##* }" >>"'"$failures"'"
  fi' <"$build_dir/thread-safety-commands"
if [[ -s "$failures" ]]; then
  echo "check-thread-safety: $(wc -l <"$failures") of $count translation units fail the analysis:" >&2
  sed 's/^/  /' "$failures" >&2
  exit 1
fi
echo "check-thread-safety: $count translation units pass clang's -Wthread-safety"
