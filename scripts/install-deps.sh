#!/usr/bin/env bash
# Installs every Debian package Granary builds, tests and benchmarks with.
# Idempotent: packages already present are left alone and apt is not touched.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config clang-format
  clang libclang-rt-14-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  librocksdb-dev liburing-dev libxxhash-dev libfuse3-dev fuse3
  libgtest-dev libgmock-dev libbenchmark-dev libssl-dev
  nlohmann-json3-dev libcli11-dev libyaml-cpp-dev libcpp-httplib-dev
  etcd-server
  python3 curl procps psmisc
  python3-torch bindfs
  slurm-wlm munge
  fio rclone python3-xxhash python3-matplotlib linux-perf
  iperf3
  iproute2
  rsync tar coreutils
  acl
  mmdebstrap
  libcurl4-openssl-dev libxml2-dev
  python3-dev pybind11-dev python3-fsspec python3-pandas
  prometheus
  chromium
)
# Node.js and npm run s3rver, the S3 server of the S3 tests: Debian's
# packages, unless a Node.js with its own npm is installed already.
command -v node >/dev/null || packages+=(nodejs)
command -v npm >/dev/null || packages+=(npm)

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

# s3rver 3.7.1 from the npm registry, as package-lock.json pins it and its
# dependencies, into tests/support/s3rver, where the S3 tests find it.
s3rver_dir="$(cd "$(dirname "$0")/.." && pwd)/tests/support/s3rver"
if [[ "$(node -p 'require(process.argv[1]).version' \
        "$s3rver_dir/node_modules/s3rver/package.json" 2>/dev/null)" != 3.7.1 ]]; then
  echo "install-deps: installing s3rver 3.7.1 from npm into $s3rver_dir" >&2
  npm ci --prefix "$s3rver_dir" --no-audit --no-fund --loglevel=error
fi

# The offline check of deploy/kubernetes (tests/deploy) runs on Node.js with
# the npm packages its lock file pins; npm ci again only when the lock changed.
manifest_check="$(cd "$(dirname "$0")/.." && pwd)/tests/deploy"
if ! cmp -s "$manifest_check/package-lock.json" "$manifest_check/node_modules/.granary-installed-lock"; then
  (cd "$manifest_check" && npm ci --no-audit --no-fund --loglevel=error)
  cp "$manifest_check/package-lock.json" "$manifest_check/node_modules/.granary-installed-lock"
fi
