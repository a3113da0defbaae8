#!/bin/bash
# When does a queued job get to compute, and what does its first epoch read?
# Job B waits behind job A on the one Slurm node (real munged, slurmctld with
# the backfill scheduler, slurmd; three granaryd in two cache groups,
# tests/scheduler_hooks/slurm_test_lib.sh) and reads its dataset once
# through the node's granaryd when it starts. Three ways, in one run, the
# dataset removed and registered again (cold) and the page cache dropped
# before each:
#
#   stage-in  B names the dataset with "#BB_LUA granary ds": granaryd stages
#             it into B's forecast group while A runs (burst_buffer.lua)
#   pre-run   B names it with --comment=granary:ds: PrologSlurmctld prewarms
#             it onto B's nodes once B has them, before its script starts
#             (what Granary did before stage-ins)
#   none      B names nothing: its first epoch reads the source
#
# The source is ext4 on a loop device (direct I/O) whose reads are limited to
# SOURCE_MIB_S MiB/s by the blkio controller (cgroup v1), in a cgroup holding
# the granaryd processes: a slow shared store. Printed per way: B's start
# after A's end, its epoch, A's end to the end of B's epoch, and the bytes
# the cluster read from the source during the epoch; then the ratios against
# stage-in.
#
# Usage (root): bash bench/scheduler_hooks/stage_in_bench.sh GRANARYD GRANARY HOOKS_DIR
# Environment: DATASET_MIB (default 512), SOURCE_MIB_S (64), A_SECONDS (40).
set -euo pipefail

granaryd="$1"
granary="$2"
hooks="$3"
dataset_mib="${DATASET_MIB:-512}"
source_mib_s="${SOURCE_MIB_S:-64}"
a_seconds="${A_SECONDS:-40}"

source "$(dirname "$0")/../../tests/scheduler_hooks/slurm_test_lib.sh"

# The slow source: ext4 on a loop device, reads throttled for granaryd.
truncate -s $((dataset_mib * 2 + 256))M "${tmp}/source.img"
loop="$(losetup -f --show --direct-io=on "${tmp}/source.img")"
cleanup_hooks+=("umount '${tmp}/source' 2>/dev/null; losetup -d '${loop}'")
mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "${loop}"
mount -o noatime "${loop}" "${tmp}/source"
mkdir -p "${tmp}/source/ds"
for i in $(seq $((dataset_mib / 64))); do
  head -c $((64 << 20)) /dev/urandom >"${tmp}/source/ds/part-${i}.bin"
done
sync
granaryd_cgroup="/sys/fs/cgroup/blkio/granary-stage-in-bench-$$"
mkdir "${granaryd_cgroup}"
cleanup_hooks+=("rmdir '${granaryd_cgroup}'")
echo "$(cat "/sys/block/$(basename "${loop}")/dev") $((source_mib_s << 20))" \
  >"${granaryd_cgroup}/blkio.throttle.read_bps_device"

start_munge
write_slurm_conf "BurstBufferType=burst_buffer/lua
SchedulerParameters=bf_interval=2
PrologSlurmctld=${tmp}/etc/granary-prolog-slurmctld
PrologEpilogTimeout=3600"
cat >"${tmp}/granaryd.yaml" <<CONFIG
stage_in_poll_ms: 500
socket_mode: 0666
fill: none
CONFIG
start_granary_cluster "${granaryd}" "${granary}" "${tmp}/granaryd.yaml"
cp "${hooks}/burst_buffer.lua" "${tmp}/etc/"
: >"${tmp}/etc/burst_buffer.conf"
mkdir -p "${tmp}/jobs"
chmod 777 "${tmp}/jobs"
cat >"${tmp}/etc/granary-prolog-slurmctld" <<PROLOG
#!/bin/bash
export GRANARY='${granary}' GRANARY_SERVER='${GRANARY_SERVER}' GRANARY_TOKEN_FILE='${GRANARY_TOKEN_FILE}'
export SLURM_CONF='${SLURM_CONF}' GRANARY_HOOK_LOG='${tmp}/jobs/prolog.log'
exec '${hooks}/granary-prolog-slurmctld'
PROLOG
chmod 755 "${tmp}/etc/granary-prolog-slurmctld"
export GRANARY="${granary}" GRANARY_HOOK_LOG="${tmp}/jobs/hook.log" GRANARY_STAGE_IN_MAX_WAIT=600
start_slurm

job_state() { scontrol show job "$1" | grep -oE 'JobState=[A-Z_]+' | cut -d= -f2; }
job_done() { [[ "$(job_state "$1")" =~ ^(COMPLETED|FAILED|CANCELLED|TIMEOUT)$ ]]; }

cat >"${tmp}/jobs/a.sh" <<JOB
#!/bin/bash
sleep ${a_seconds}
date +%s.%N >"${tmp}/jobs/a.end"
JOB
results="${tmp}/results.txt"
: >"${results}"
for way in stage-in pre-run none; do
  "${granary}" dataset rm ds >/dev/null 2>&1 || true
  "${granary}" dataset add ds "${tmp}/source/ds" >/dev/null
  cold() {
    "${granary}" locate ds --fresh --json | /usr/bin/python3 -c \
      'import json, sys; assert sum(n["cached_bytes"] for n in json.load(sys.stdin)["nodes"]) == 0'
  }
  wait_for 30 cold || fail "dataset ds is not cold before ${way}"
  sync
  echo 3 >/proc/sys/vm/drop_caches
  rm -f "${tmp}"/jobs/a.end "${tmp}"/jobs/b.*
  {
    echo '#!/bin/bash'
    [[ "${way}" == stage-in ]] && echo '#BB_LUA granary ds'
    echo "granary() { env -u GRANARY_TOKEN_FILE '${granary}' --server 'unix:${tmp}/granaryd-localhost.sock' \"\$@\"; }"
    echo "source_bytes() { granary status --json | /usr/bin/python3 -c 'import json, sys; print(sum(n[\"bytes_from_source\"] for n in json.load(sys.stdin)[\"nodes\"]))'; }"
    echo "date +%s.%N >'${tmp}/jobs/b.start'"
    echo "source_bytes >'${tmp}/jobs/b.source0'"
    echo "for f in '${tmp}'/source/ds/*; do granary cat \"ds/\$(basename \"\$f\")\" >/dev/null; done"
    echo "source_bytes >'${tmp}/jobs/b.source1'"
    echo "date +%s.%N >'${tmp}/jobs/b.end'"
  } >"${tmp}/jobs/b.sh"
  chmod 755 "${tmp}"/jobs/*.sh
  comment=()
  [[ "${way}" == pre-run ]] && comment=(--comment=granary:ds)
  job_a="$(cd "${tmp}/jobs" && runuser -u nobody -- sbatch --parsable -c 2 --time=5 \
    --output=/dev/null "${tmp}/jobs/a.sh")"
  a_running() { [[ "$(job_state "${job_a}")" == RUNNING ]]; }
  wait_for 60 a_running || fail "job A did not start"
  job_b="$(cd "${tmp}/jobs" && runuser -u nobody -- sbatch --parsable -c 2 --time=10 \
    "${comment[@]}" --output="${tmp}/jobs/b.out" "${tmp}/jobs/b.sh")"
  wait_for 900 job_done "${job_b}" || fail "job B did not finish"
  [[ "$(job_state "${job_b}")" == COMPLETED ]] || fail "job B: $(job_state "${job_b}")"
  /usr/bin/python3 - "${way}" "${tmp}/jobs" >>"${results}" <<'ROW'
import sys
way, jobs = sys.argv[1], sys.argv[2]
t = {name: float(open("%s/%s" % (jobs, name)).read())
     for name in ("a.end", "b.start", "b.end", "b.source0", "b.source1")}
print("%s %.2f %.2f %.2f %d" % (way, t["b.start"] - t["a.end"], t["b.end"] - t["b.start"],
                                t["b.end"] - t["a.end"], t["b.source1"] - t["b.source0"]))
ROW
  echo "done: ${way}: $(tail -n1 "${results}")" >&2
done

/usr/bin/python3 - "${results}" "${dataset_mib}" "${source_mib_s}" "${a_seconds}" <<'TABLE'
import sys
rows = {}
for line in open(sys.argv[1]):
    way, start, epoch, total, source = line.split()
    rows[way] = (float(start), float(epoch), float(total), int(source))
print("dataset %s MiB, source %s MiB/s, job A %s s\n" % tuple(sys.argv[2:5]))
print("| way | B's start after A's end (s) | B's first epoch (s) | A's end to B's epoch end (s) | source MiB read during B's epoch |")
print("|---|---:|---:|---:|---:|")
for way in ("stage-in", "pre-run", "none"):
    s, e, t, b = rows[way]
    print("| %s | %.2f | %.2f | %.2f | %.0f |" % (way, s, e, t, b / 2**20))
s = rows["stage-in"]
for way in ("pre-run", "none"):
    o = rows[way]
    print("\n%s / stage-in: start after A %.2f, A's end to epoch end %.2f" % (way, o[0] / s[0], o[2] / s[2]))
TABLE
