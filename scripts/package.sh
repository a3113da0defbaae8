#!/usr/bin/env bash
# Builds Granary's Debian packages (cmake/Packaging.cmake) on Debian 12:
# installs the build dependencies, builds the five programs in a Release
# build (build-release/, or GRANARY_BUILD_DIR) and writes granaryd,
# granary-fuse, granary, granary-csi, granary-webhook and granary-extender packages into its
# packages/ folder. Install them with apt, which fetches their runtime
# libraries from Debian:  apt-get install ./build-release/packages/granaryd_*.deb ...
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build_dir="${GRANARY_BUILD_DIR:-$root/build-release}"

bash "$root/scripts/install-deps.sh"
GRANARY_BUILD_DIR="$build_dir" \
  GRANARY_BUILD_TARGETS="granaryd granary-fuse granary granary-csi granary-webhook granary-extender" \
  bash "$root/scripts/build.sh" -DCMAKE_BUILD_TYPE=Release
rm -rf "$build_dir/packages"
(cd "$build_dir" && cpack >/dev/null)
ls -1 "$build_dir"/packages/*.deb
