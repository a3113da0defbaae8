#!/bin/bash
# Granary's Debian packages (cmake/Packaging.cmake), made by cpack from the
# build directory under test and installed on a machine that never built
# Granary: a minbase Debian 12 root made by mmdebstrap from Debian's archive,
# where apt resolves the packages' dependencies. Checks what the packages
# hold (the programs, the units, the default configuration as a conffile),
# what the package scripts made (the groups granary and granary-admin, the
# cluster token readable by root alone), verifies the installed units with
# systemd-analyze, then starts granaryd as its unit starts it, with the configuration
# an administrator writes (one source root), registers a dataset, reads it
# through a granary-fuse mount byte for byte, and reads through the socket as
# a member of the granary group and, refused, as a user who is not.
#
# Usage: package_test.sh BUILD_DIR
# Needs root, mmdebstrap (scripts/install-deps.sh) and Debian's archive.
set -euo pipefail

build_dir="$1"
tmp="$(mktemp -d)"
root="${tmp}/root"
granaryd_pid=""
fuse_pid=""

fail() {
  echo "FAIL: $*" >&2
  for log in "${tmp}"/*.log; do echo "--- ${log}" >&2; tail -n 30 "${log}" >&2 || true; done
  exit 1
}
cleanup() {
  local status=$?
  if mountpoint -q "${root}/mnt/granary" 2>/dev/null; then
    fusermount3 -u "${root}/mnt/granary" 2>/dev/null || umount -l "${root}/mnt/granary" || true
  fi
  for pid in "${fuse_pid}" "${granaryd_pid}"; do
    if [[ -n ${pid} ]]; then kill -TERM "${pid}" 2>/dev/null || true; fi
  done
  for pid in "${fuse_pid}" "${granaryd_pid}"; do
    if [[ -n ${pid} ]]; then wait "${pid}" 2>/dev/null || true; fi
  done
  for mounted in run sys dev proc; do
    if mountpoint -q "${root}/${mounted}" 2>/dev/null; then
      umount -R "${root}/${mounted}" 2>/dev/null || umount -R -l "${root}/${mounted}" || true
    fi
  done
  rm -rf "${tmp}" || true
  exit "${status}"
}
trap cleanup EXIT
trap 'echo "FAIL: line ${LINENO}: ${BASH_COMMAND}" >&2' ERR

echo "== cpack"
(cd "${build_dir}" && cpack -D CPACK_OUTPUT_FILE_PREFIX="${tmp}/packages" >"${tmp}/cpack.log" 2>&1) ||
  fail "cpack failed"
packages=(granaryd granary-fuse granary granary-csi granary-webhook granary-extender)
for package in "${packages[@]}"; do
  deb=$(ls "${tmp}/packages/${package}"_*.deb 2>/dev/null) || fail "no ${package} package"
  [[ $(dpkg-deb --field "${deb}" Package) == "${package}" ]] || fail "${deb} is not ${package}"
  [[ $(dpkg-deb --field "${deb}" Depends) == *libc6* ]] || fail "${package} names no runtime libraries"
  [[ $(dpkg-deb --contents "${deb}") == *" ./usr/bin/${package}"* ]] ||
    fail "${package} lacks /usr/bin/${package}"
done
deb() { ls "${tmp}/packages/$1"_*.deb; }
[[ $(dpkg-deb --contents "$(deb granaryd)") == *usr/lib/systemd/system/granaryd.service* ]] ||
  fail "granaryd lacks its unit"
[[ $(dpkg-deb --contents "$(deb granary-fuse)") == *usr/lib/systemd/system/granary-fuse@.service* ]] ||
  fail "granary-fuse lacks its unit"
[[ $(dpkg-deb --info "$(deb granaryd)" conffiles) == "/etc/granary/granaryd.yaml" ]] ||
  fail "the default configuration is not a conffile"

echo "== a Debian 12 root that never built Granary"
debs=()
for package in granaryd granary-fuse granary; do debs+=("/root/$(basename "$(deb "${package}")")"); done
# With systemd, to verify the units where they are installed.
mmdebstrap --variant=minbase --include=systemd \
  --customize-hook="copy-in $(deb granaryd) $(deb granary-fuse) $(deb granary) /root" \
  --customize-hook="chroot \"\$1\" apt-get install --yes --no-install-recommends ${debs[*]}" \
  bookworm "${root}" http://deb.debian.org/debian >"${tmp}/mmdebstrap.log" 2>&1 ||
  fail "mmdebstrap could not install the packages"

in_root() { chroot "${root}" "$@"; }
in_root getent group granary >/dev/null || fail "the package made no granary group"
in_root getent group granary-admin >/dev/null || fail "the package made no granary-admin group"
[[ $(stat -c '%a %U' "${root}/etc/granary/token") == "600 root" ]] ||
  fail "the cluster token is not root's alone: $(stat -c '%a %U' "${root}/etc/granary/token")"
grep -q '^source_roots: \[\]' "${root}/etc/granary/granaryd.yaml" ||
  fail "the default configuration opens source roots"

mount -t proc proc "${root}/proc"
mount --rbind /sys "${root}/sys"
mount --rbind /dev "${root}/dev"
mount -t tmpfs tmpfs "${root}/run"

echo "== systemd-analyze verify"
in_root systemd-analyze verify granaryd.service granary-fuse@mnt-granary.service \
  >"${tmp}/verify.log" 2>&1 || fail "systemd-analyze verify: $(cat "${tmp}/verify.log")"

# What the unit's RuntimeDirectory= and StateDirectory= make.
mkdir -p "${root}/run/granary" "${root}/var/lib/granary"
mkdir -p "${root}/srv/data/sub"
echo "read through a package" >"${root}/srv/data/hello.txt"
head -c 3000000 /dev/urandom >"${root}/srv/data/sub/blob.bin"
chmod -R a+rX "${root}/srv/data"
sed -i 's|^source_roots: \[\]|source_roots: [/srv/data]|' "${root}/etc/granary/granaryd.yaml"

echo "== granaryd as its unit starts it"
read -r -a granaryd_command < <(sed -n 's/^ExecStart=//p' "${root}/usr/lib/systemd/system/granaryd.service")
chroot "${root}" "${granaryd_command[@]}" >"${tmp}/granaryd.log" 2>&1 &
granaryd_pid=$!
for _ in $(seq 100); do
  in_root granary status >/dev/null 2>&1 && break
  kill -0 "${granaryd_pid}" 2>/dev/null || fail "granaryd exited"
  sleep 0.1
done
in_root granary dataset add demo /srv/data >"${tmp}/add.log" 2>&1 || fail "dataset add failed"

echo "== a dataset read through the mount"
mkdir -p "${root}/mnt/granary"
chroot "${root}" granary-fuse /mnt/granary --foreground --server unix:/run/granary/granaryd.sock \
  >"${tmp}/granary-fuse.log" 2>&1 &
fuse_pid=$!
for _ in $(seq 100); do
  [[ -e ${root}/mnt/granary/demo/hello.txt ]] && break
  kill -0 "${fuse_pid}" 2>/dev/null || fail "granary-fuse exited"
  sleep 0.1
done
cmp "${root}/mnt/granary/demo/hello.txt" "${root}/srv/data/hello.txt" || fail "hello.txt differs"
cmp "${root}/mnt/granary/demo/sub/blob.bin" "${root}/srv/data/sub/blob.bin" || fail "blob.bin differs"

echo "== the socket: its group reads, others are refused"
in_root useradd --groups granary reader
in_root useradd outsider
read_as() { chroot --userspec="$1" --groups="$2" "${root}" granary cat demo/hello.txt; }
[[ $(read_as reader granary) == "read through a package" ]] || fail "a member of granary could not read"
if read_as outsider outsider >"${tmp}/outsider.log" 2>&1; then
  fail "a user outside the granary group read through the socket"
fi

echo "PASS"
