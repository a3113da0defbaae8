#!/bin/bash
# Receipts of Slurm jobs, kept by the hooks of scheduler_hooks/slurm as they
# are installed (burst_buffer.lua's teardown, and the Epilog granary-epilog),
# against real daemons on localhost: munged, slurmctld and slurmd (Slurm
# 22.05, slurm_test_lib.sh), one granaryd with a receipt_dir and a real
# granary-fuse mount of it. Jobs run as user nobody (Slurm refuses burst
# buffers to root).
#
# proctrack/linuxproc gives a job no cgroup of its own here, so while each job
# runs, the test reads through the mount from a cgroup v2 directory named
# job_<id>, as Slurm's cgroup plugins name a job's: granary-fuse counts those
# reads for slurm:<id>, as it would a job's own.
#
#  - Job 1 names ds in a "#BB_LUA granary ds" directive; once it ended, its
#    teardown has ended it on granaryd (the hook's log says so), and the
#    receipt names ds at its current version (the digest `granary dataset
#    show` prints) with the files and bytes read, in receipt_dir (mode 0640)
#    and from `granary jobs --receipt`.
#  - Job 2 names no dataset (no burst buffer, so no teardown): the Epilog
#    ends it, and its receipt is kept the same way.
#
# Usage: slurm_receipt_test.sh GRANARYD GRANARY GRANARY_FUSE HOOKS_DIR
set -euo pipefail

granaryd="$1"
granary="$2"
granary_fuse="$3"
hooks="$4"

source "$(dirname "$0")/slurm_test_lib.sh"

cgroup_root=""
for root in /sys/fs/cgroup/unified /sys/fs/cgroup; do
  if [[ -f "${root}/cgroup.procs" && -f "${root}/cgroup.controllers" && -w "${root}" ]]; then
    cgroup_root="${root}"
    break
  fi
done
[[ -n "${cgroup_root}" ]] || fail "no writable cgroup v2 hierarchy here"
cgroups="${cgroup_root}/granary-slurm-receipt-$$"
mkdir "${cgroups}"
cleanup_hooks+=("rmdir ${cgroups}/job_* ${cgroups}")

start_munge
write_slurm_conf "BurstBufferType=burst_buffer/lua
Epilog=${tmp}/etc/granary-epilog"

mkdir -p "${tmp}/source/ds" "${tmp}/receipts-parent"
head -c 300000 /dev/urandom >"${tmp}/source/ds/a.bin"
head -c 200001 /dev/urandom >"${tmp}/source/ds/b.bin"
chmod -R a+rX "${tmp}/source"
cat >"${tmp}/granaryd.yaml" <<CONFIG
receipt_dir: ${tmp}/receipts-parent/receipts
CONFIG
"${granaryd}" --config "${tmp}/granaryd.yaml" --data-dir "${tmp}/granary" \
  --socket "${tmp}/granaryd.sock" --metrics-listen "127.0.0.1:$(free_port)" --node-id localhost \
  --source-root "${tmp}/source" >"${tmp}/log/granaryd" 2>&1 &
pids+=($!)
export GRANARY_SERVER="unix:${tmp}/granaryd.sock"
wait_for 20 "${granary}" status || fail "granaryd did not start"
"${granary}" dataset add ds "${tmp}/source/ds" >/dev/null
version="$("${granary}" dataset show ds --json | /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["version"])')"

mkdir -p "${tmp}/mnt"
"${granary_fuse}" "${tmp}/mnt" --foreground --server "${GRANARY_SERVER}" -o allow_other \
  >"${tmp}/log/granary-fuse" 2>&1 &
pids+=($!)
cleanup_hooks=("umount -l ${tmp}/mnt" "${cleanup_hooks[@]}")
wait_for 20 test -f "${tmp}/mnt/ds/a.bin" || fail "the mount did not show ds"

cp "${hooks}/burst_buffer.lua" "${tmp}/etc/"
: >"${tmp}/etc/burst_buffer.conf"
# The epilog as installed, with this test's CLI, server and log.
cat >"${tmp}/etc/granary-epilog" <<EPILOG
#!/bin/bash
export GRANARY='${granary}' GRANARY_SERVER='${GRANARY_SERVER}' GRANARY_HOOK_LOG='${tmp}/epilog.log'
exec '${hooks}/granary-epilog'
EPILOG
chmod 755 "${tmp}/etc/granary-epilog"
# For burst_buffer.lua, which runs in slurmctld's environment.
export GRANARY="${granary}" GRANARY_HOOK_LOG="${tmp}/teardown.log"
mkdir -p "${tmp}/jobs"
chmod 777 "${tmp}/jobs"
start_slurm

job_state() { scontrol show job "$1" | grep -oE 'JobState=[A-Z_]+' | cut -d= -f2; }
job_done() { [[ "$(job_state "$1")" =~ ^(COMPLETED|FAILED|CANCELLED|TIMEOUT)$ ]]; }
# A field of slurm:JOB's figures for ds in `granary jobs --json`.
job_figure() {
  "${granary}" jobs --json | /usr/bin/python3 -c '
import json, sys
print(next((j[sys.argv[2]] for j in json.load(sys.stdin)["jobs"]
            if j["job"] == "slurm:" + sys.argv[1] and j["dataset"] == "ds"), 0))' "$1" "$2"
}
counted() { [[ "$(job_figure "$1" files_opened)" == 2 && "$(job_figure "$1" bytes_read)" == 500001 ]]; }

# run_job NAME DIRECTIVE: submits a job that waits for the test's reads, reads
# a.bin and b.bin as that job, lets it end; prints the job id.
run_job() {
  local name="$1" directive="$2" id
  cat >"${tmp}/jobs/${name}.sh" <<JOB
#!/bin/bash
${directive}
touch '${tmp}/jobs/${name}.running'
while [[ ! -e '${tmp}/jobs/${name}.go' ]]; do sleep 0.1; done
JOB
  chmod 755 "${tmp}/jobs/${name}.sh"
  id="$(cd "${tmp}/jobs" && runuser -u nobody -- sbatch --parsable --time=2 \
    --output="${tmp}/jobs/${name}.out" "${tmp}/jobs/${name}.sh" 2>>"${tmp}/log/sbatch")" ||
    fail "sbatch refused job ${name}"
  wait_for 60 test -e "${tmp}/jobs/${name}.running" ||
    fail "job ${name} did not start: $(scontrol show job "${id}")"
  mkdir -p "${cgroups}/job_${id}"
  sh -c "echo \$\$ >'${cgroups}/job_${id}/cgroup.procs' &&
         exec cat '${tmp}/mnt/ds/a.bin' '${tmp}/mnt/ds/b.bin' >/dev/null" ||
    fail "reading ds as job ${id} failed"
  wait_for 20 counted "${id}" || fail "job ${id}'s reads not counted: $("${granary}" jobs --json)"
  touch "${tmp}/jobs/${name}.go"
  wait_for 60 job_done "${id}" || fail "job ${id} did not end: $(scontrol show job "${id}")"
  echo "${id}"
}

# check_receipt JOB: the receipt file and `granary jobs --receipt` name ds at
# its version with what the job read.
check_receipt() {
  local id="$1" file="${tmp}/receipts-parent/receipts/slurm_$1.json"
  wait_for 30 test -f "${file}" || fail "no receipt file for job ${id}"
  [[ "$(stat -c %a "${file}")" == 640 ]] || fail "receipt mode $(stat -c %a "${file}")"
  "${granary}" jobs --receipt "slurm:${id}" --json >"${tmp}/receipt-${id}.json" ||
    fail "granary jobs --receipt slurm:${id} failed"
  /usr/bin/python3 - "${file}" "${tmp}/receipt-${id}.json" "${id}" "${version}" <<'PY' ||
import json, sys
written, asked = (json.load(open(path)) for path in sys.argv[1:3])
assert written == asked, (written, asked)
assert written["job"] == "slurm:" + sys.argv[3], written
assert written["node_id"] == "localhost", written
[read] = written["reads"]
assert (read["dataset"], read["version"]) == ("ds", sys.argv[4]), read
assert (read["files_opened"], read["bytes_read"]) == (2, 500001), read
assert sum(read["bytes"].values()) == 500001, read
assert 0 < written["started_unix_ms"] <= written["ended_unix_ms"], written
PY
    fail "job ${id}'s receipt is wrong: $(cat "${file}")"
}

job1="$(run_job bb "#BB_LUA granary ds")"
wait_for 30 grep -q "JobId=${job1} job slurm:${job1} ended on node localhost" "${tmp}/teardown.log" ||
  fail "the teardown did not end job ${job1}: $(cat "${tmp}/teardown.log" 2>&1)"
check_receipt "${job1}"

job2="$(run_job plain "")"
wait_for 30 grep -q "granary-epilog: job ${job2}: job slurm:${job2} ended on node localhost" \
  "${tmp}/epilog.log" || fail "the epilog did not end job ${job2}: $(cat "${tmp}/epilog.log" 2>&1)"
if grep -q "JobId=${job2} " "${tmp}/teardown.log"; then
  fail "job ${job2} has no burst buffer, yet a teardown ran"
fi
check_receipt "${job2}"

echo "PASS: burst buffer teardown and epilog kept receipts naming ds ${version}"
