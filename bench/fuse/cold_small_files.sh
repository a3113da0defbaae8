#!/bin/bash
# Cold small-file reads through the mount, one setup against another (a
# granaryd binary, and granary-fuse's flags), with the source read directly
# as the baseline of each round.
#
# Per round and setup (in turn first): a fresh granaryd (fresh data directory) and mount, a
# dataset of FILES files of 110 KB (fill off unless FILL says), the page cache dropped, every
# file read whole by THREADS threads; then the source read the same way.
# Prints one line per read: seconds, granaryd's and granary-fuse's CPU in
# clock ticks, and the megabytes granaryd read from the source by then.
#
# With READ=random, each read is READS reads of PIECE_KIB KiB at random
# offsets of the files instead (large files: SIZES, and FILES a few).
#
# Usage (root): bench/fuse/cold_small_files.sh BUILD_DIR ROUNDS SETUP...
#   SETUP: a granaryd binary, or GRANARYD::FLAGS with granary-fuse's flags
#   after the two colons, e.g. build/granaryd::--cold-open-memory=0; the
#   granary-fuse beside the granaryd binary mounts, else BUILD_DIR's
#   (FILES=3000 THREADS=4 SIZES=MIN-MAX FILL=none READ=whole READS=2000
#   PIECE_KIB=64 in the environment to change them; FILL=on-read lets the
#   fill run)
#
# With REFERENCE=PASSTHROUGH_HP (libfuse's example daemon, built by
# bench/fuse/fuse_reference.py --build-reference-only), each round also reads
# the source through that daemon mounted over it with FUSE passthrough: what
# any FUSE mount costs these reads before it caches anything.
set -euo pipefail
build=$1 rounds=$2
shift 2
source "$(dirname "$0")/small_files_lib.sh"
setups=("$@")
read_order=""
if [[ ${READ:-whole} == random ]]; then read_order=random; fi
for ((round = 1; round <= rounds; round++)); do
  # The setups take turns going first: a read that follows another can be
  # slowed by the disk still writing back the one before.
  order=("${setups[@]}")
  if ((round % 2 == 0)); then
    order=()
    for ((i = ${#setups[@]} - 1; i >= 0; i--)); do order+=("${setups[i]}"); done
  fi
  for setup in "${order[@]}"; do
    granaryd=${setup%%::*} fuse_flags=()
    if [[ $setup == *::* ]]; then read -ra fuse_flags <<<"${setup#*::}"; fi
    rm -rf "$work/data"
    "$granaryd" --source-root "$work/src" --data-dir "$work/data" --socket "$work/g.sock" \
      --metrics-listen 127.0.0.1:0 >"$work/granaryd.log" 2>&1 &
    server=$!
    for _ in $(seq 100); do "$build/granary" status >/dev/null 2>&1 && break; sleep 0.1; done
    "$build/granary" dataset add cold "$work/src" --fill "${FILL:-none}" >/dev/null
    fuse_binary=$(dirname "$granaryd")/granary-fuse
    if [[ ! -x $fuse_binary ]]; then fuse_binary=$build/granary-fuse; fi
    "$fuse_binary" "$mount_dir" "${fuse_flags[@]}" 2>"$work/granary-fuse.log"
    fuse=$(pgrep -n -x granary-fuse)
    for _ in $(seq 100); do [[ -d $mount_dir/cold ]] && break; sleep 0.1; done
    drop_caches
    g0=$(cpu "$server") f0=$(cpu "$fuse")
    result=$(read_all "$mount_dir/cold" $read_order)
    source_mb=$("$build/granary" status --json |
      python3 -c 'import json, sys; print("%.1f" % (json.load(sys.stdin)["nodes"][0]["bytes_from_source"] / 1e6))')
    echo "round $round $setup: $result granaryd_cpu $(($(cpu "$server") - g0)) fuse_cpu $(($(cpu "$fuse") - f0)) source_mb $source_mb"
    stop
  done
  if [[ -n ${REFERENCE:-} ]]; then
    "$REFERENCE" --foreground "$work/src" "$mount_dir" &
    reference=$!
    for _ in $(seq 100); do mountpoint -q "$mount_dir" && break; sleep 0.1; done
    drop_caches
    r0=$(cpu "$reference")
    echo "round $round passthrough_hp: $(read_all "$mount_dir" $read_order) daemon_cpu $(($(cpu "$reference") - r0))"
    fusermount3 -u "$mount_dir"
    wait "$reference"
  fi
  drop_caches
  echo "round $round source: $(read_all "$work/src" $read_order)"
done
