#!/usr/bin/env bash
# Builds the Granary image (deploy/image/Containerfile) from Granary's Debian
# packages, with no container registry, as root on Debian 12:
#   1. the packages (scripts/package.sh: a Release build, in build-release/
#      or $GRANARY_BUILD_DIR);
#   2. a minbase Debian 12 root filesystem (mmdebstrap) with the packages
#      installed by apt, which brings their runtime libraries (and fuse3) from
#      Debian as on any node; the cluster token the granaryd package makes is
#      removed (each cluster's comes from its Secret); imported with
#      `podman import` as localhost/granary-base:bookworm;
#   3. `podman build --isolation=chroot` (no container runtime, no network)
#      of the Containerfile over it, tagged localhost/granary:VERSION, the
#      image the manifests of deploy/kubernetes name.
# Then it runs each program's --help in the image (runc, no network).
# GRANARY_IMAGE overrides the tag. deploy/README.md says how to bring the
# image to a cluster's nodes.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
version="$(sed -n 's/^project(granary VERSION \([0-9.]*\).*/\1/p' "$root/CMakeLists.txt")"
image="${GRANARY_IMAGE:-localhost/granary:$version}"
base="localhost/granary-base:bookworm"
programs=(granaryd granary-fuse granary granary-csi granary-extender granary-webhook)

for tool in mmdebstrap podman runc; do
  if ! command -v "$tool" >/dev/null; then
    echo "build-image: $tool is missing: apt-get install mmdebstrap podman runc" >&2
    exit 1
  fi
done

build_dir="${GRANARY_BUILD_DIR:-$root/build-release}"
GRANARY_BUILD_DIR="$build_dir" bash "$root/scripts/package.sh" >/dev/null
debs=()
for program in "${programs[@]}"; do debs+=("$(ls "$build_dir"/packages/"$program"_*.deb)"); done

work="$root/build-image"
rm -rf "$work"
mkdir -p "$work/context"
in_root=()
for deb in "${debs[@]}"; do in_root+=("/tmp/$(basename "$deb")"); done
mmdebstrap --variant=minbase --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  --customize-hook="copy-in ${debs[*]} /tmp" \
  --customize-hook="chroot \"\$1\" apt-get install --yes --no-install-recommends ${in_root[*]}" \
  --customize-hook="rm -f \"\$1\"/tmp/*.deb \"\$1\"/etc/granary/token" \
  --customize-hook="chroot \"\$1\" apt-get clean" \
  bookworm "$work/rootfs.tar"
podman import "$work/rootfs.tar" "$base" >/dev/null

# Limits podman sets for what it runs: no more than this shell has (it cannot
# raise them), and few processes.
ulimits=(--ulimit "nofile=$(ulimit -Sn):$(ulimit -Sn)" --ulimit "nproc=4096:4096")
podman build --isolation=chroot "${ulimits[@]}" --build-arg "BASE=$base" \
  -f "$root/deploy/image/Containerfile" -t "$image" "$work/context"

for program in "${programs[@]}"; do
  podman run --rm --runtime runc --network none "${ulimits[@]}" "$image" \
    "/usr/bin/$program" --help >/dev/null
done
podman run --rm --runtime runc --network none "${ulimits[@]}" "$image" \
  sh -c 'test ! -e /etc/granary/token && getent group granary >/dev/null'
podman image ls "$image"
echo "build-image: built $image" >&2
