#!/bin/bash
# Prints, every half second until killed, what the machine does during a
# benchmark: MiB read from the loop device of bench/e2e's throttled source
# since the last line (the device backed by a file named source.img; the
# cache's own loop device, granary-cache.img, is not counted), how busy the
# CPUs were, and the CPU clock ticks used so far by granaryd (all of them),
# granary-fuse and fio.
#
# Usage: bench/e2e/sample_load.sh > samples.txt &   (then run the benchmark)
set -uo pipefail
ticks_of() {
  local sum=0 pid
  for pid in $(pgrep -x "$1"); do
    sum=$((sum + $(awk '{print $14 + $15}' "/proc/$pid/stat" 2>/dev/null || echo 0)))
  done
  echo "$sum"
}
sectors_read() {
  local sum=0 loop
  for loop in /sys/block/loop*; do
    [[ $(cat "$loop/loop/backing_file" 2>/dev/null) == */source.img ]] || continue
    sum=$((sum + $(awk '{print $3}' "$loop/stat")))
  done
  echo "$sum"
}
start=$(date +%s%N) last_sectors=$(sectors_read) last_busy=0 last_total=0
echo "seconds  source_MiB  cpu_busy_%  granaryd_ticks  granary_fuse_ticks  fio_ticks"
while true; do
  sleep 0.5
  read -r _ user nice system idle iowait irq softirq _ < /proc/stat
  busy=$((user + nice + system + irq + softirq)) total=$((user + nice + system + irq + softirq + idle + iowait))
  sectors=$(sectors_read)
  if ((last_total > 0)); then
    printf "%.2f  %d  %d  %d  %d  %d\n" "$(echo "($(date +%s%N) - $start) / 1000000000" | bc -l)" \
      $(((sectors - last_sectors) / 2048)) $((100 * (busy - last_busy) / (total - last_total))) \
      "$(ticks_of granaryd)" "$(ticks_of granary-fuse)" "$(ticks_of fio)"
  fi
  last_sectors=$sectors last_busy=$busy last_total=$total
done
