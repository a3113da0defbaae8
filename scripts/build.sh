#!/usr/bin/env bash
# Configures and builds Granary into build/ (Ninja, ccache). Extra arguments go
# to cmake's configure step, e.g. -DGRANARY_SANITIZE=thread.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build_dir="${GRANARY_BUILD_DIR:-$root/build}"
export CCACHE_BASEDIR="$root"
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
cmake -S "$root" -B "$build_dir" -G Ninja "$@" >/dev/null
cmake --build "$build_dir" -j"$(nproc)"
