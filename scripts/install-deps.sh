#!/usr/bin/env bash
# Installs every Debian package Granary builds, tests and benchmarks with.
# Idempotent: packages already present are left alone and apt is not touched.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config clang-format
  clang libclang-rt-14-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  librocksdb-dev liburing-dev libxxhash-dev libfuse3-dev fuse3
  libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libcli11-dev libyaml-cpp-dev libcpp-httplib-dev
  etcd-server
  python3 curl procps psmisc
  python3-torch bindfs
  slurm-wlm munge
  fio rclone python3-xxhash python3-matplotlib linux-perf
  iperf3
  iproute2
  rsync tar coreutils
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}" >&2
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The offline check of deploy/kubernetes (tests/deploy) runs on Node.js with
# the npm packages its lock file pins; npm ci again only when the lock changed.
if ! command -v npm >/dev/null; then
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends nodejs npm
fi
manifest_check="$(cd "$(dirname "$0")/.." && pwd)/tests/deploy"
if ! cmp -s "$manifest_check/package-lock.json" "$manifest_check/node_modules/.granary-installed-lock"; then
  (cd "$manifest_check" && npm ci --no-audit --no-fund --loglevel=error)
  cp "$manifest_check/package-lock.json" "$manifest_check/node_modules/.granary-installed-lock"
fi
