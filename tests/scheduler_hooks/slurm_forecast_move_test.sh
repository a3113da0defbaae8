#!/bin/bash
# A forecast that moves to another cache group, against real daemons: munged,
# slurmctld with the backfill scheduler and three slurmd, each in a network
# namespace of its own (slurm_test_lib.sh), nodes n1, n2 and n3 of Granary
# groups rack-a, rack-b and rack-c (one granaryd each, node id = Slurm name).
#
#  - A1, A2 and A3 take n1, n2 and n3 with time limits of 10, 12 and 14 minutes,
#    each until the test ends it. Job B ("#BB_LUA granary dsB") pends: the
#    backfill scheduler plans it on n1, where A1 ends first, and dsB is
#    cached in rack-a and held there.
#  - A1's time limit grows to 20 minutes: B's plan moves to n2, and its
#    stage-in follows: dsB is cached in rack-b and held there alone.
#  - A3 ends early: B starts on n3 at once, against its forecast. Its
#    pre_run fills rack-c within the policy's longest wait
#    (GRANARY_STAGE_IN_MAX_WAIT=20 s), copying dsB from the groups that hold
#    it, and neither it nor B's epoch reads the source.
# The figures (how long the stage-in took to follow, how long pre_run held B)
# are printed for bench/RESULTS.md.
#
# Usage: slurm_forecast_move_test.sh GRANARYD GRANARY HOOKS_DIR
set -euo pipefail

granaryd="$1"
granary="$2"
hooks="$3"
max_wait=20

source "$(dirname "$0")/slurm_test_lib.sh"

start_munge
slurm_nodes=(n1 n2 n3)
write_slurm_conf "BurstBufferType=burst_buffer/lua
SchedulerParameters=bf_interval=2"
cat >"${tmp}/granaryd.yaml" <<CONFIG
stage_in_poll_ms: 300
socket_mode: 0666
capacity: 96MiB
hold_share: 0.5
fill: none
CONFIG
granary_nodes=(n1:rack-a n2:rack-b n3:rack-c)
start_granary_cluster "${granaryd}" "${granary}" "${tmp}/granaryd.yaml"

mkdir -p "${tmp}/source/dsB"
for name in a b c; do head -c $((8 << 20)) /dev/urandom >"${tmp}/source/dsB/${name}.bin"; done
dsB_bytes=$((24 << 20))
"${granary}" dataset add dsB "${tmp}/source/dsB" >/dev/null

cp "${hooks}/burst_buffer.lua" "${tmp}/etc/"
: >"${tmp}/etc/burst_buffer.conf"
export GRANARY="${granary}" GRANARY_HOOK_LOG="${tmp}/jobs/hook.log" GRANARY_STAGE_IN_MAX_WAIT="${max_wait}"
mkdir -p "${tmp}/jobs"
chmod 777 "${tmp}/jobs"
start_slurm_nodes

stage_in() {  # stage_in JOB EXPRESSION [ARG]: EXPRESSION (Python, over `s`, JOB's stage-in) as JSON
  "${granary}" stage-in ls --json | /usr/bin/python3 -c '
import json, sys
s = next((s for s in json.load(sys.stdin)["stage_ins"] if s["job_id"] == sys.argv[1]), None)
print(json.dumps(eval(sys.argv[2])) if s else "null")' "$@"
}
holders() {  # the (node, holder) of dsB's holds
  "${granary}" holds --json | /usr/bin/python3 -c '
import json, sys
print(sorted((n["node_id"], h["holder"]) for n in json.load(sys.stdin)["nodes"]
             for h in n["holds"] if h["dataset"] == "dsB"))'
}
fraction_in() {  # fraction_in GROUP: the share of dsB cached in GROUP
  "${granary}" locate dsB --fresh --json | /usr/bin/python3 -c '
import json, sys
print({g["group"]: g["fraction"] for g in json.load(sys.stdin)["groups"]}.get(sys.argv[1], 0.0))' "$1"
}
source_bytes() {
  "${granary}" status --json | /usr/bin/python3 -c \
    'import json, sys; print(sum(n["bytes_from_source"] for n in json.load(sys.stdin)["nodes"]))'
}
now() { date +%s.%N; }
seconds() { /usr/bin/python3 -c 'import sys; print("%.1f" % (float(sys.argv[2]) - float(sys.argv[1])))' "$@"; }

# --- A1, A2, A3 hold the nodes until the test ends them.
declare -A job_a
for i in 1 2 3; do
  cat >"${tmp}/jobs/a${i}.sh" <<JOB
#!/bin/bash
while [[ ! -e '${tmp}/jobs/a${i}.end' ]]; do sleep 0.2; done
date +%s.%N >'${tmp}/jobs/a${i}.ended'
JOB
done
cat >"${tmp}/jobs/b.sh" <<JOB
#!/bin/bash
#BB_LUA granary dsB
date +%s.%N >'${tmp}/jobs/b.start'
echo "\${SLURMD_NODENAME}" >'${tmp}/jobs/b.node'
total=0
for name in a b c; do
  bytes=\$(env -u GRANARY_TOKEN_FILE '${granary}' --server "unix:${tmp}/granaryd-\${SLURMD_NODENAME}.sock" \
    cat "dsB/\${name}.bin" | wc -c)
  total=\$((total + bytes))
done
echo "\${total}" >'${tmp}/jobs/b.read'
JOB
chmod 755 "${tmp}"/jobs/*.sh
job_a[1]="$(submit a1 -w n1 -c 2 --time=10)" || fail "sbatch refused A1"
job_a[2]="$(submit a2 -w n2 -c 2 --time=12)" || fail "sbatch refused A2"
job_a[3]="$(submit a3 -w n3 -c 2 --time=14)" || fail "sbatch refused A3"
for i in 1 2 3; do
  wait_for 30 bash -c "scontrol show job ${job_a[${i}]} | grep -q JobState=RUNNING" ||
    fail "job A${i} did not start: $(scontrol show job "${job_a[${i}]}")"
done
job_b="$(submit b -c 2 --time=1)" || fail "sbatch refused job B"

# --- B planned on n1: dsB cached and held in rack-a.
staged_in() {  # staged_in GROUP: B's stage-in targets GROUP alone, and dsB is cached there
  [[ "$(stage_in "${job_b}" '[s["state"], s["groups"], [t["state"] for t in s["targets"] if t["group"] == sys.argv[3]]]' "$1")" == \
     "[\"planned\", [\"$1\"], [\"cached\"]]" ]]
}
wait_for 60 staged_in rack-a || fail "dsB not staged in rack-a for B: $("${granary}" stage-in ls; scontrol show job -o "${job_b}")"
[[ "$(job_field "${job_b}" SchedNodeList)" == n1 ]] || fail "B is not planned on n1: $(scontrol show job -o "${job_b}")"
held_in() { [[ "$(holders)" == "[('$1', 'slurm:${job_b}')]" ]]; }
wait_for 20 held_in n1 || fail "dsB is not held on n1 alone: $(holders)"

# Until backfill plans B, its stage-in warms every group of its partition;
# whether granaryd saw B before its plan is Slurm's timing. A group it never
# targeted holds none of dsB.
targeted_before_plan() {  # targeted_before_plan GROUP
  grep -h "stage-in: job ${job_b} (forecast" "${tmp}"/log/granaryd-* | grep -q "targets groups .*$1"
}
for group in rack-b rack-c; do
  if ! targeted_before_plan "${group}"; then
    [[ "$(fraction_in "${group}")" == 0.0 ]] || fail "dsB is in ${group}, where B was never planned"
  fi
done

# --- A1 runs longer: B's plan moves to n2, and its stage-in follows.
moved="$(now)"
scontrol update JobId="${job_a[1]}" TimeLimit=20
wait_for 60 staged_in rack-b || fail "B's stage-in did not follow its plan to rack-b: $("${granary}" stage-in ls; scontrol show job -o "${job_b}")"
followed="$(now)"
[[ "$(job_field "${job_b}" SchedNodeList)" == n2 ]] || fail "B is not planned on n2: $(scontrol show job -o "${job_b}")"
[[ "$(fraction_in rack-b)" == 1.0 ]] || fail "dsB is not whole in rack-b: $(fraction_in rack-b)"
wait_for 20 held_in n2 || fail "dsB is not held on n2 alone once B's plan moved: $(holders)"
[[ "$(job_field "${job_b}" JobState)" == PENDING ]] || fail "B is not pending"

# --- A3 ends early: B starts on n3, against its forecast; pre_run fills rack-c.
if ! targeted_before_plan rack-c; then
  [[ "$(fraction_in rack-c)" == 0.0 ]] || fail "dsB is in rack-c before B has its nodes"
fi
source_before="$(source_bytes)"
touch "${tmp}/jobs/a3.end"
b_done() { [[ "$(job_field "${job_b}" JobState)" =~ ^(COMPLETED|FAILED|CANCELLED|TIMEOUT)$ ]]; }
wait_for 120 b_done || fail "job B did not finish: $(scontrol show job "${job_b}")"
[[ "$(job_field "${job_b}" JobState)" == COMPLETED ]] || fail "job B: $(scontrol show job "${job_b}")"
[[ "$(cat "${tmp}/jobs/b.node")" == n3 ]] || fail "B ran on $(cat "${tmp}/jobs/b.node"), not n3"
[[ "$(cat "${tmp}/jobs/b.read")" == "${dsB_bytes}" ]] || fail "B read $(cat "${tmp}/jobs/b.read") bytes of ${dsB_bytes}"
[[ "$(fraction_in rack-c)" == 1.0 ]] || fail "pre_run did not fill rack-c: $(fraction_in rack-c)"
# Neither the top-up (it copied dsB from the groups the forecast filled) nor
# B's epoch read the source.
[[ "$(($(source_bytes) - source_before))" == 0 ]] ||
  fail "$(($(source_bytes) - source_before)) bytes came from the source during B"
topping="$(grep "JobId=${job_b} topping up 'dsB' on n3 (at most ${max_wait} s)" "${tmp}/jobs/hook.log")" ||
  fail "no pre_run line for B on n3: $(cat "${tmp}/jobs/hook.log")"
topped="$(grep "JobId=${job_b} topped up 'dsB' on n3" "${tmp}/jobs/hook.log")" ||
  fail "B's pre_run did not top up: $(cat "${tmp}/jobs/hook.log")"
held_s=$(($(date -d "${topped%% *}" +%s) - $(date -d "${topping%% *}" +%s)))
((held_s <= max_wait)) || fail "pre_run held B ${held_s} s, more than the policy's ${max_wait} s"

for i in 1 2; do touch "${tmp}/jobs/a${i}.end"; done
echo "FIGURES: B's stage-in followed its plan from rack-a to rack-b (dsB, ${dsB_bytes} bytes, cached there) $(seconds "${moved}" "${followed}") s after A1's time limit grew"
echo "FIGURES: B started on n3 $(seconds "$(cat "${tmp}/jobs/a3.ended")" "$(cat "${tmp}/jobs/b.start")") s after A3 ended; pre_run held it ${held_s} s (hook log, whole seconds; policy ${max_wait} s) to fill rack-c"
echo "PASS: B's stage-in followed its moving forecast from rack-a to rack-b with its hold, and when B started on n3 instead its pre_run filled rack-c within the policy; neither it nor B's epoch read the source"
