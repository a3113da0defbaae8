#!/bin/bash
# Stage-ins run nearest start first, against real daemons on localhost
# (slurm_test_lib.sh: munged, slurmctld with the backfill scheduler, slurmd,
# and three granaryd in two cache groups).
#
# Job A takes both CPUs; FAR and NEAR pend behind it, FAR submitted first
# but with the lower priority, so the backfill scheduler plans NEAR to start
# first. Their stage-ins begin while the controller does not answer
# (slurmctld stopped with SIGSTOP), FAR's first, so that granaryd learns both
# forecasts in one reading of the queue once it answers again: NEAR's
# dataset is warmed first, then FAR's, and both end cached in rack-a.
#
# Usage: slurm_stage_in_order_test.sh GRANARYD GRANARY
set -euo pipefail

granaryd="$1"
granary="$2"

source "$(dirname "$0")/slurm_test_lib.sh"

start_munge
write_slurm_conf "SchedulerParameters=bf_interval=2"
cat >"${tmp}/granaryd.yaml" <<CONFIG
stage_in_poll_ms: 300
capacity: 96MiB
fill: none
CONFIG
start_granary_cluster "${granaryd}" "${granary}" "${tmp}/granaryd.yaml"
for dataset in dsNear dsFar; do
  mkdir -p "${tmp}/source/${dataset}"
  head -c $((4 << 20)) /dev/urandom >"${tmp}/source/${dataset}/data.bin"
  "${granary}" dataset add "${dataset}" "${tmp}/source/${dataset}" >/dev/null
done
start_slurm

mkdir -p "${tmp}/jobs"
chmod 777 "${tmp}/jobs"
printf '#!/bin/bash\nsleep 60\n' >"${tmp}/jobs/wait.sh"
chmod 755 "${tmp}/jobs/wait.sh"
start_of() { date -d "$(job_field "$1" StartTime)" +%s; }

job_a="$(submit wait -c 2 --time=2)" || fail "sbatch refused job A"
a_running() { [[ "$(job_field "${job_a}" JobState)" == RUNNING ]]; }
wait_for 30 a_running || fail "job A did not start: $(scontrol show job "${job_a}")"
job_far="$(submit wait -c 2 --time=1 --nice=1000)" || fail "sbatch refused job FAR"
job_near="$(submit wait -c 2 --time=1)" || fail "sbatch refused job NEAR"
planned() {
  [[ "$(job_field "${job_far}" SchedNodeList)" == localhost &&
     "$(job_field "${job_near}" SchedNodeList)" == localhost ]] &&
    (($(start_of "${job_near}") < $(start_of "${job_far}")))
}
wait_for 40 planned ||
  fail "the backfill scheduler did not plan NEAR before FAR: $(scontrol show job -o)"

kill -STOP "${slurmctld_pid}"
cleanup_hooks+=("kill -CONT ${slurmctld_pid}")
"${granary}" stage-in start "${job_far}" dsFar >/dev/null || fail "FAR's stage-in did not start"
"${granary}" stage-in start "${job_near}" dsNear >/dev/null || fail "NEAR's stage-in did not start"
# The reading of the queue under way when FAR's began fails (it times out):
# the next one asks for both.
log="${tmp}/log/granaryd-localhost"
wait_for 30 grep -q "cannot read the Slurm queue" "${log}" ||
  fail "granaryd did not give up reading the stopped controller's queue"
kill -CONT "${slurmctld_pid}"

stage_in_states() {
  "${granary}" stage-in ls --json | /usr/bin/python3 -c '
import json, sys
jobs = {s["job_id"]: s for s in json.load(sys.stdin)["stage_ins"]}
print(" ".join("%s:%s" % (s["state"], ",".join(t["group"] + "=" + t["state"] for t in s["targets"]))
               for s in (jobs.get(j) for j in sys.argv[1:]) if s))' "${job_near}" "${job_far}"
}
both_cached() {
  [[ "$(stage_in_states)" == "planned:rack-a=cached planned:rack-a=cached" ]]
}
wait_for 60 both_cached || fail "NEAR's and FAR's datasets were not staged: $(stage_in_states)"
order="$(grep -oE "stage-in: job (${job_near}|${job_far}) \(start [0-9]+\): warming '[A-Za-z]+'" "${log}")"
[[ "$(head -n 1 <<<"${order}")" == *"job ${job_near} "*"warming 'dsNear'"* ]] ||
  fail "NEAR was not warmed first: ${order}"
[[ "$(sed -n 2p <<<"${order}")" == *"job ${job_far} "*"warming 'dsFar'"* ]] ||
  fail "FAR was not warmed second: ${order}"
echo "PASS: NEAR (begun second, planned to start first) was staged before FAR"
