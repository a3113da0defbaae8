#!/bin/bash
# Epochs over prewarmed small files through a fresh mount, against the same
# files copied to the local disk: the first epoch (whose opens get every
# file's descriptor from granaryd, one request per open or fewer) and the
# epochs after it (whose opens find the descriptors kept by the mount).
#
# One granaryd (fresh data directory) and one mount per setup, a dataset of
# FILES files of 110 KB prewarmed, then EPOCHS epochs, each after dropping
# the page cache, read whole by THREADS threads in a shuffled order, each
# followed by the local copy read the same way. Prints per epoch: seconds,
# granaryd's and granary-fuse's CPU in clock ticks (10 ms), and granaryd's
# count of files handed out whole at an open and ahead of one.
#
# Usage (root): bench/fuse/first_warm_epoch.sh BUILD_DIR [BUILD_DIR...]
#   (FILES=3000 THREADS=4 EPOCHS=3 in the environment to change them)
set -euo pipefail
epochs=${EPOCHS:-3}
source "$(dirname "$0")/small_files_lib.sh"
cp -r "$work/src" "$work/copy"
metric() { curl -s "http://$metrics/metrics" | awk -v name="$1" '$1 == name {print $2}'; }
for build in "$@"; do
  rm -rf "$work/data"
  metrics="127.0.0.1:$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  "$build/granaryd" --source-root "$work/src" --data-dir "$work/data" --socket "$work/g.sock" \
    --metrics-listen "$metrics" >"$work/granaryd.log" 2>&1 &
  server=$!
  for _ in $(seq 100); do "$build/granary" status >/dev/null 2>&1 && break; sleep 0.1; done
  "$build/granary" dataset add warm "$work/src" --fill none >/dev/null
  "$build/granary" prewarm warm >/dev/null 2>&1
  "$build/granary-fuse" "$mount_dir" 2>"$work/granary-fuse.log"
  fuse=$(pgrep -n -x granary-fuse)
  for _ in $(seq 100); do [[ -d $mount_dir/warm ]] && break; sleep 0.1; done
  for ((epoch = 1; epoch <= epochs; epoch++)); do
    drop_caches
    g0=$(cpu "$server") f0=$(cpu "$fuse")
    took=$(read_all "$mount_dir/warm" shuffled)
    echo "$build epoch $epoch: mount $took granaryd_cpu $(($(cpu "$server") - g0))" \
      "fuse_cpu $(($(cpu "$fuse") - f0)) whole_files $(metric granary_store_whole_files_total)" \
      "ahead $(metric granary_store_whole_files_ahead_total)"
    drop_caches
    echo "$build epoch $epoch: local copy $(read_all "$work/copy" shuffled)"
  done
  stop
done
