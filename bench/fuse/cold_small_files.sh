#!/bin/bash
# Cold small-file reads through the mount, one setup against another (a
# granaryd binary, and granary-fuse's flags), with the source read directly
# as the baseline of each round.
#
# Per round and setup (in turn first): a fresh granaryd (fresh data directory) and mount, a
# dataset of FILES files of 110 KB (fill off), the page cache dropped, every
# file read whole by THREADS threads; then the source read the same way.
# Prints one line per read: seconds, and granaryd's and granary-fuse's CPU
# in clock ticks.
#
# Usage (root): bench/fuse/cold_small_files.sh BUILD_DIR ROUNDS SETUP...
#   SETUP: a granaryd binary, or GRANARYD::FLAGS with granary-fuse's flags
#   after the two colons, e.g. build/granaryd::--cold-open-memory=0
#   (FILES=3000 THREADS=4 in the environment to change them)
set -euo pipefail
build=$1 rounds=$2
shift 2
files=${FILES:-3000} threads=${THREADS:-4}
work=$(mktemp -d /var/tmp/granary-cold.XXXXXX)
export GRANARY_SERVER="unix:$work/g.sock"
server="" mount_dir="$work/mnt"
stop() {
  if mountpoint -q "$mount_dir"; then fusermount3 -u "$mount_dir"; fi
  if [[ -n $server ]]; then kill "$server" && wait "$server" || true; fi
  server=""
}
trap 'stop; rm -rf "$work"' EXIT
mkdir -p "$work/src" "$mount_dir"
python3 - "$work/src" "$files" <<'EOF'
import os, sys
for i in range(int(sys.argv[2])):
    with open(os.path.join(sys.argv[1], "f%06d" % i), "wb") as f:
        f.write(os.urandom(110_000))
EOF
read_all() {
  python3 - "$1" "$threads" <<'EOF'
import concurrent.futures, os, sys, time
root, threads = sys.argv[1], int(sys.argv[2])
paths = sorted(os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs)
def read(path):
    with open(path, "rb") as f:
        return len(f.read())
started = time.perf_counter()
with concurrent.futures.ThreadPoolExecutor(threads) as pool:
    total = sum(pool.map(read, paths))
print("%d files %.1f MB %.3f s" % (len(paths), total / 1e6, time.perf_counter() - started), end="")
EOF
}
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
drop_caches() { sync && echo 3 >/proc/sys/vm/drop_caches; }
setups=("$@")
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
    "$build/granary" dataset add cold "$work/src" --fill none >/dev/null
    "$build/granary-fuse" "$mount_dir" "${fuse_flags[@]}" 2>"$work/granary-fuse.log"
    fuse=$(pgrep -n -x granary-fuse)
    for _ in $(seq 100); do [[ -d $mount_dir/cold ]] && break; sleep 0.1; done
    drop_caches
    g0=$(cpu "$server") f0=$(cpu "$fuse")
    echo "round $round $setup: $(read_all "$mount_dir/cold") granaryd_cpu $(($(cpu "$server") - g0)) fuse_cpu $(($(cpu "$fuse") - f0))"
    stop
  done
  drop_caches
  echo "round $round source: $(read_all "$work/src")"
done
