#!/bin/bash
# A PyTorch DataLoader job (4 workers, dataloader_job.py) run by srun in a real
# Slurm allocation (munged, slurmctld, slurmd of Slurm 22.05 on localhost,
# slurm_test_lib.sh) reads a half-cached dataset through a real granary-fuse
# mount of a real granaryd: half its files prewarmed, the other half cold at
# a slow source (granaryd reads it at 4 MiB/s). Slurm itself places the job's processes in its cgroups
# (proctrack/cgroup and task/cgroup), which is how Granary finds the job:
#
#  - `granary jobs --json` lists the job as slurm:<its id> with every file it
#    opened, and bytes by origin that add up to the bytes the job read, with
#    some from this node's store and some from the source;
#  - the wait Granary counts for the job is within 10% of the time the job's
#    workers measured inside their own open() and read() calls.
#
# Slurm 22.05's cgroup/v2 plugin refuses a host with v1 controllers mounted
# ("Hybrid mode is not supported"), as this one has: cgroup/v1 it is, and a
# job's processes are in freezer:/slurm_<node>/uid_0/job_<id>/step_0.
#
# Every read goes through granary-fuse (--no-passthrough): with passthrough
# the kernel reads a cached file itself, and Granary sees its open only, so
# it cannot count the time spent reading it. The source is slow because the
# kernel's side of each open and read (waking a granary-fuse thread, then the
# worker) is time the workers measure and granary-fuse cannot: milliseconds
# a request on a loaded machine, a fixed cost that a real wait on the source
# makes small.
#
# Prints the figures (for bench/RESULTS.md). Usage (root):
#   slurm_dataloader_test.sh GRANARYD GRANARY GRANARY_FUSE JOB_SCRIPT
set -euo pipefail

granaryd="$1"
granary="$2"
granary_fuse="$3"
job_script="$4"

source "$(dirname "$0")/../scheduler_hooks/slurm_test_lib.sh"

slurm_proctrack=proctrack/cgroup
slurm_task_plugin=task/cgroup
start_munge
# A job id of its own, so this test's job cgroups never meet another run's.
write_slurm_conf "FirstJobId=$((100000 + RANDOM * 16))"
cat >"${tmp}/etc/cgroup.conf" <<CONF
CgroupPlugin=cgroup/v1
ConstrainCores=yes
ConstrainRAMSpace=yes
CONF
for controller in freezer cpuset memory; do
  cleanup_hooks+=("rmdir /sys/fs/cgroup/${controller}/slurm_localhost/uid_0 /sys/fs/cgroup/${controller}/slurm_localhost 2>/dev/null")
done
start_slurm

# The source: ext4 on a loop device, which granaryd reads at 4 MiB/s (the
# blkio controller's throttle on its cgroup), as it would a busy shared
# filesystem: a cold file costs the job a wait of its own, not just the
# round trips around it. 48 warm and 48 cold files of 200 KiB to 1 MiB.
truncate -s 256M "${tmp}/source.img"
loop="$(losetup -f --show --direct-io=on "${tmp}/source.img")"
cleanup_hooks+=("umount '${tmp}/source' 2>/dev/null; losetup -d '${loop}'")
mkfs.ext4 -q -F "${loop}"
mount -o noatime "${loop}" "${tmp}/source"
for half in warm cold; do
  mkdir -p "${tmp}/source/ds/${half}"
  for i in $(seq 48); do
    head -c $(((200 + (i * 37) % 825) << 10)) /dev/urandom >"${tmp}/source/ds/${half}/${i}.bin"
  done
done
dataset_bytes="$(find "${tmp}/source/ds" -type f -printf '%s\n' | awk '{sum += $1} END {print sum}')"
# Mounted afresh, the source holds none of its files in the page cache.
umount "${tmp}/source"
mount -o noatime,ro "${loop}" "${tmp}/source"
granaryd_cgroup="/sys/fs/cgroup/blkio/granary-dataloader-test-$$"
mkdir "${granaryd_cgroup}"
cleanup_hooks+=("rmdir '${granaryd_cgroup}'")
echo "$(cat "/sys/block/$(basename "${loop}")/dev") $((4 << 20))" \
  >"${granaryd_cgroup}/blkio.throttle.read_bps_device"

cat >"${tmp}/granaryd.yaml" <<CONFIG
fill: none
CONFIG
bash -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "${granaryd_cgroup}" \
  "${granaryd}" --config "${tmp}/granaryd.yaml" --data-dir "${tmp}/granary" \
  --socket "${tmp}/granaryd.sock" --metrics-listen "127.0.0.1:$(free_port)" --capacity 1GiB \
  --source-root "${tmp}/source" >"${tmp}/log/granaryd" 2>&1 &
pids+=($!)
export GRANARY_SERVER="unix:${tmp}/granaryd.sock"
wait_for 20 "${granary}" status || fail "granaryd did not start"
"${granary}" dataset add ds "${tmp}/source/ds" >/dev/null || fail "dataset add failed"
"${granary}" prewarm ds --paths warm --json >/dev/null || fail "prewarm of the warm half failed"

mkdir -p "${tmp}/mnt"
"${granary_fuse}" "${tmp}/mnt" --server "${GRANARY_SERVER}" --dataset ds --no-passthrough \
  --log-file "${tmp}/log/granary-fuse" || fail "granary-fuse did not mount"
cleanup_hooks=("fusermount3 -u '${tmp}/mnt'" "${cleanup_hooks[@]}")
wait_for 20 test -d "${tmp}/mnt/ds/cold" || fail "the mount does not show ds"

mkdir -p "${tmp}/jobs"
timeout 300 srun --job-name=dataloader -c 2 /usr/bin/python3 "${job_script}" "${tmp}/mnt/ds" \
  >"${tmp}/jobs/dataloader.out" 2>"${tmp}/jobs/dataloader.err" ||
  fail "the DataLoader job failed: $(cat "${tmp}/jobs/dataloader.err")"
job="$(jq -r .job "${tmp}/jobs/dataloader.out")"
files="$(jq -r .files "${tmp}/jobs/dataloader.out")"
[[ "${files}" -eq 96 ]] || fail "the job read ${files} files, not 96"
[[ "$(jq -r .bytes "${tmp}/jobs/dataloader.out")" -eq "${dataset_bytes}" ]] ||
  fail "the job read $(jq -r .bytes "${tmp}/jobs/dataloader.out") bytes, not ${dataset_bytes}"

# granary-fuse reports to granaryd every second.
listed() {
  "${granary}" jobs --json | jq -e --arg job "slurm:${job}" --argjson files "${files}" \
    '.jobs[] | select(.job == $job and .dataset == "ds" and .files_opened == $files)' \
    >"${tmp}/jobs/listed.json"
}
wait_for 20 listed || fail "granary jobs does not list slurm:${job} with ${files} files opened: $("${granary}" jobs --json)"

/usr/bin/python3 - "${tmp}/jobs/dataloader.out" "${tmp}/jobs/listed.json" <<'CHECK' || fail "the figures differ"
import json
import sys

job = json.load(open(sys.argv[1]))
listed = json.load(open(sys.argv[2]))
by_origin = listed["bytes"]
ratio = listed["wait_seconds"] / job["inside_seconds"]
print("slurm:%s read %d files, %d bytes in %.3f s (workers inside open and read: %.3f s)"
      % (job["job"], job["files"], job["bytes"], job["wall_seconds"], job["inside_seconds"]))
print("granary jobs: wait %.3f s, %.3f of the workers' own (opens %.3f s); bytes by origin %s "
      "in reads %s" % (listed["wait_seconds"], ratio, listed["open_wait_seconds"],
                       json.dumps(by_origin), json.dumps(listed["reads"])))
failed = []
if listed["bytes_read"] != job["bytes"] or sum(by_origin.values()) != job["bytes"]:
    failed.append("bytes by origin do not add up to the %d bytes read" % job["bytes"])
if by_origin.get("local", 0) == 0 or by_origin.get("source", 0) == 0:
    failed.append("a half-cached dataset read nothing from the store or nothing from the source")
if not 0.9 <= ratio <= 1.1:
    failed.append("Granary's wait is %.3f of the workers' own time, not within 10%%" % ratio)
for failure in failed:
    print("FAIL:", failure, file=sys.stderr)
sys.exit(1 if failed else 0)
CHECK
echo "PASS"
