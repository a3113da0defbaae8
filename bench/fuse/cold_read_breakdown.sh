#!/bin/bash
# Where a cold read's time goes: READS random reads of PIECE_KIB KiB of FILES
# files of SIZES bytes through a fresh granaryd and mount (fill off, page
# cache dropped), one thread, then the same reads of the source directly.
# Prints both times and, from granaryd's metrics, the time it took to obtain
# the reads' bytes (granary_read_latency_seconds: index lookup, source read,
# storing) and the bytes it read from the source. With PERF=FILE, perf
# records granaryd and granary-fuse during the reads into FILE.
#
# Usage (root): bench/fuse/cold_read_breakdown.sh BUILD_DIR
#   (FILES=2 SIZES=536870912-536870912 READS=1000 PIECE_KIB=64 by default)
set -euo pipefail
build=$1
export FILES=${FILES:-2} SIZES=${SIZES:-536870912-536870912} READS=${READS:-1000}
export PIECE_KIB=${PIECE_KIB:-64} THREADS=1
source "$(dirname "$0")/small_files_lib.sh"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$build/granaryd" --source-root "$work/src" --data-dir "$work/data" --socket "$work/g.sock" \
  --metrics-listen "127.0.0.1:$port" >"$work/granaryd.log" 2>&1 &
server=$!
for _ in $(seq 100); do "$build/granary" status >/dev/null 2>&1 && break; sleep 0.1; done
"$build/granary" dataset add cold "$work/src" --fill none >/dev/null
"$build/granary-fuse" "$mount_dir" 2>"$work/granary-fuse.log"
fuse=$(pgrep -n -x granary-fuse)
for _ in $(seq 100); do [[ -d $mount_dir/cold ]] && break; sleep 0.1; done
drop_caches
recorder=""
if [[ -n ${PERF:-} ]]; then
  perf record -F 2000 -g -o "$PERF" -p "$server,$fuse" 2>"$work/perf.log" &
  recorder=$!
  sleep 1
fi
echo "mount: $(read_all "$mount_dir/cold" random)"
if [[ -n $recorder ]]; then kill -INT "$recorder" && wait "$recorder" || true; fi
curl -s "127.0.0.1:$port/metrics" | python3 -c '
import sys
m = {l.split()[0]: float(l.split()[1]) for l in sys.stdin if l[0] != "#" and len(l.split()) == 2}
count = m["granary_read_latency_seconds_count"]
print("granaryd: %d chunk reads, %.3f ms each to obtain their bytes; %.1f MB read from the source"
      % (count, 1e3 * m["granary_read_latency_seconds_sum"] / count,
         m["granary_bytes_from_source_total"] / 1e6))'
stop
drop_caches
echo "source: $(read_all "$work/src" random)"
