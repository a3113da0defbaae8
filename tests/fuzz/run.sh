#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz with clang, ASan and UBSan (in
# build-fuzz/, or $GRANARY_FUZZ_BUILD_DIR) and runs each for a bounded time,
# starting from its saved corpus in tests/fuzz/corpus/<target>/. Exits non-zero
# at the first crash, sanitizer report, broken property or hang, leaving the
# input in <build dir>/fuzz-artifacts/<target>/: fix the bug, and save the input
# in the target's corpus so its corpus replay test keeps it fixed.
#
#   GRANARY_FUZZ_SECONDS  seconds per target (default 20)
#   GRANARY_FUZZ_TARGETS  which targets (default: all, space-separated)
# New inputs the fuzzers find go to <build dir>/fuzz-corpus/<target>/; the
# saved corpus is never written.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build_dir="${GRANARY_FUZZ_BUILD_DIR:-$root/build-fuzz}"
seconds="${GRANARY_FUZZ_SECONDS:-20}"
read -r -a targets <<<"${GRANARY_FUZZ_TARGETS:-manifest config members extender grpc_request}"

GRANARY_BUILD_DIR="$build_dir" GRANARY_BUILD_TARGETS="${targets[*]/%/_fuzzer}" \
  bash "$root/scripts/build.sh" -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DGRANARY_FUZZ=ON -DGRANARY_BUILD_BENCH=OFF

for target in "${targets[@]}"; do
  corpus="$build_dir/fuzz-corpus/$target"
  artifacts="$build_dir/fuzz-artifacts/$target"
  log="$build_dir/fuzz-$target.log"
  mkdir -p "$corpus" "$artifacts"
  options=()
  # Every weight unit of a member is 1,024 placement-ring points: 80 members
  # of weight 1000 fit in 4 KiB and take over 2 GiB, past libFuzzer's memory
  # limit. Shorter files keep the fuzzer on the parser.
  [[ "$target" == members ]] && options+=(-max_len=1024)
  if ! "$build_dir/tests/fuzz/${target}_fuzzer" -max_total_time="$seconds" -timeout=30 \
      -print_final_stats=1 -artifact_prefix="$artifacts/" "${options[@]}" \
      "$corpus" "$root/tests/fuzz/corpus/$target" >"$log" 2>&1; then
    tail -n 60 "$log" >&2
    echo "fuzz: $target failed; input in $artifacts/, full log in $log" >&2
    exit 1
  fi
  runs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")"
  echo "fuzz: $target: ${runs:-?} inputs in ${seconds} s, no failure"
done
