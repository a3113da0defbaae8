#!/usr/bin/env bash
# Configures and builds Granary into build/ (Ninja, ccache). Extra arguments go
# to cmake's configure step, e.g. -DGRANARY_SANITIZE=thread. GRANARY_BUILD_DIR
# picks another build directory; GRANARY_BUILD_TARGETS (space-separated) builds
# only those targets. Warnings are errors here (-DGRANARY_WERROR=OFF turns
# that off), unlike in a plain cmake build.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build_dir="${GRANARY_BUILD_DIR:-$root/build}"
# Paths relative to the checkout and no working directory in the hash, so a
# fresh clone in another folder reuses what an earlier build compiled.
export CCACHE_BASEDIR="$root"
export CCACHE_NOHASHDIR=true
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
cmake -S "$root" -B "$build_dir" -G Ninja -DGRANARY_WERROR=ON "$@" >/dev/null
targets=()
for target in ${GRANARY_BUILD_TARGETS:-}; do targets+=(--target "$target"); done
cmake --build "$build_dir" -j"$(nproc)" "${targets[@]}"
