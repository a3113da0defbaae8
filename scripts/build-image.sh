#!/usr/bin/env bash
# Builds the Granary image (deploy/image/Containerfile) with no container
# registry, as root on Debian 12:
#   1. the binaries (scripts/build.sh: RelWithDebInfo, -O2, in build/ or
#      $GRANARY_BUILD_DIR), stripped;
#   2. a minbase Debian 12 root filesystem (mmdebstrap, from Debian's
#      packages: those that ship the libraries ldd lists for the binaries, and
#      fuse3), imported with `podman import` as localhost/granary-base:bookworm;
#   3. `podman build --isolation=chroot` (no container runtime, no network)
#      of the Containerfile over it, tagged localhost/granary:VERSION, the
#      image the manifests of deploy/kubernetes name.
# Then it runs each binary's --help in the image (runc, no network).
# GRANARY_IMAGE overrides the tag. deploy/README.md says how to bring the
# image to a cluster's nodes.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
version="$(sed -n 's/^project(granary VERSION \([0-9.]*\).*/\1/p' "$root/CMakeLists.txt")"
image="${GRANARY_IMAGE:-localhost/granary:$version}"
base="localhost/granary-base:bookworm"
binaries=(granaryd granary-fuse granary granary-csi granary-extender granary-webhook)

for tool in mmdebstrap podman runc; do
  if ! command -v "$tool" >/dev/null; then
    echo "build-image: $tool is missing: apt-get install mmdebstrap podman runc" >&2
    exit 1
  fi
done

build_dir="${GRANARY_BUILD_DIR:-$root/build}"
GRANARY_BUILD_DIR="$build_dir" GRANARY_BUILD_TARGETS="${binaries[*]}" bash "$root/scripts/build.sh"

work="$root/build-image"
rm -rf "$work"
mkdir -p "$work/context"
for binary in "${binaries[@]}"; do strip -o "$work/context/$binary" "$build_dir/$binary"; done

# The Debian packages that ship the binaries' shared libraries.
mapfile -t libraries < <(for binary in "${binaries[@]}"; do ldd "$work/context/$binary"; done |
  awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u)
mapfile -t packages < <(for library in "${libraries[@]}"; do
  dpkg -S "$(readlink -f "$library")" 2>/dev/null || dpkg -S "$library"
done | cut -d: -f1 | sort -u)
packages+=(fuse3)
echo "build-image: runtime packages: ${packages[*]}" >&2

mmdebstrap --variant=minbase --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
  --include="$(IFS=,; echo "${packages[*]}")" \
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  bookworm "$work/rootfs.tar"
podman import "$work/rootfs.tar" "$base" >/dev/null

# Limits podman sets for what it runs: no more than this shell has (it cannot
# raise them), and few processes.
ulimits=(--ulimit "nofile=$(ulimit -Sn):$(ulimit -Sn)" --ulimit "nproc=4096:4096")
podman build --isolation=chroot "${ulimits[@]}" --build-arg "BASE=$base" \
  -f "$root/deploy/image/Containerfile" -t "$image" "$work/context"

for binary in "${binaries[@]}"; do
  podman run --rm --runtime runc --network none "${ulimits[@]}" "$image" \
    "/usr/local/bin/$binary" --help >/dev/null
done
podman image ls "$image"
echo "build-image: built $image" >&2
