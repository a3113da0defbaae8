# Shared by the small-file benchmarks of this folder (sourced, not run): a
# scratch directory with a source of FILES files of 110 KB (or of sizes drawn
# uniformly from SIZES, "MIN-MAX" bytes), a granaryd and a mount to stop, and
# the readers and counters they time with.
#
# After sourcing: $work (removed at exit), $work/src, $mount_dir, $files,
# $threads, $reads and $piece_kib (read_all random), and $server to set to
# granaryd's pid once it runs.
files=${FILES:-3000} threads=${THREADS:-4} sizes=${SIZES:-110000-110000}
reads=${READS:-2000} piece_kib=${PIECE_KIB:-64}
work=$(mktemp -d /var/tmp/granary-small-files.XXXXXX)
export GRANARY_SERVER="unix:$work/g.sock"
server="" mount_dir="$work/mnt"
# Unmounts and stops granaryd, if they run.
stop() {
  if mountpoint -q "$mount_dir"; then fusermount3 -u "$mount_dir"; fi
  if [[ -n $server ]]; then kill "$server" && wait "$server" || true; fi
  server=""
}
trap 'stop; rm -rf "$work"' EXIT
mkdir -p "$work/src" "$mount_dir"
python3 - "$work/src" "$files" "$sizes" <<'PY'
import os, random, sys
low, high = (int(x) for x in sys.argv[3].split("-"))
sizes = random.Random(int(sys.argv[2]))
for i in range(int(sys.argv[2])):
    with open(os.path.join(sys.argv[1], "f%06d" % i), "wb") as f:
        f.write(os.urandom(sizes.randint(low, high)))
PY

# Reads the files under $1 with $threads threads, as $2 says: every file whole
# in name order (""), or shuffled ("shuffled"), or $reads pieces of
# $piece_kib KiB at random offsets ("random"; seeded, so every setup reads the
# same pieces). Prints the reads, megabytes and seconds.
read_all() {
  python3 - "$1" "$threads" "${2:-}" "$reads" "$piece_kib" <<'PY'
import concurrent.futures, os, random, sys, time
root, threads, order = sys.argv[1], int(sys.argv[2]), sys.argv[3]
reads, piece = int(sys.argv[4]), int(sys.argv[5]) << 10
paths = sorted(os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs)
if order == "random":
    fds = {p: os.open(p, os.O_RDONLY) for p in paths}
    pick = random.Random(reads)
    work = [(p, pick.randrange(0, max(1, os.path.getsize(p) - piece)))
            for p in (pick.choice(paths) for _ in range(reads))]
    def read(item):
        return len(os.pread(fds[item[0]], piece, item[1]))
else:
    work = paths
    if order == "shuffled":
        random.Random(len(paths)).shuffle(work)
    def read(path):
        with open(path, "rb") as f:
            return len(f.read())
started = time.perf_counter()
with concurrent.futures.ThreadPoolExecutor(threads) as pool:
    total = sum(pool.map(read, work))
print("%d reads %.1f MB %.3f s" % (len(work), total / 1e6, time.perf_counter() - started), end="")
PY
}

# CPU time of process $1 so far, in clock ticks (user + system).
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }

drop_caches() { sync && echo 3 >/proc/sys/vm/drop_caches; }
