#!/bin/bash
# Stage-in from the scheduler's forecast (scheduler_hooks/slurm/burst_buffer.lua
# and granaryd's stage-ins, cache_server/staging/) against real daemons on
# localhost: munged, slurmctld with the backfill scheduler and slurmd (Slurm
# 22.05), and three granaryd in two cache groups with the cluster token
# (slurm_test_lib.sh). The Slurm node "localhost" is Granary node "localhost"
# of rack-a. Jobs are submitted as user nobody (Slurm refuses burst buffers to
# root).
#
#  - Job A takes both CPUs for 60 s; job B, pending behind it, names dsB with
#    "#BB_LUA granary dsB". B's data_in hands it to granaryd, which follows the
#    forecast (SchedNodeList localhost, group rack-a) and caches dsB in rack-a,
#    and only there, while A still runs; `scontrol show bbstat` shows it.
#  - Holds (capacity 96 MiB a node, hold_share 0.5, versions inactive 2 s
#    after their last use): while B pends, dsB is held on both members of
#    rack-a (`granary holds`); job E, pending too, names a dataset whose hold
#    would pass the share, and its hold is refused naming B's; a reader C of
#    a dataset larger than rack-a's cache evicts an unheld, prewarmed dataset
#    (dsX) but not dsB.
#  - localhost's granaryd, killed (SIGKILL) and started again while B pends,
#    follows B again: dsB cached and held in rack-a, as before.
#  - B starts after A ends, its pre_run finds nothing to top up, and its first
#    epoch (every file of dsB read through localhost's granaryd) reads 0 bytes
#    from the source. After B, its stage-in has ended (teardown) and its hold
#    is released: C reading again may then take dsB's space.
#  - A job naming a dataset Granary does not know runs and completes; its
#    stage-in names the unknown dataset.
#  - The hook's stage-in call returns in under a second when granaryd is
#    down or accepts and never answers; with localhost's granaryd stopped, a
#    burst buffer job still runs and completes.
#  - Stage-ins are an administrator's act: user nobody on the Unix socket,
#    and a TCP caller without the token, are refused.
#
# Usage: slurm_stage_in_test.sh GRANARYD GRANARY HOOKS_DIR
set -euo pipefail

granaryd="$1"
granary="$2"
hooks="$3"

source "$(dirname "$0")/slurm_test_lib.sh"

start_munge
# Slurm's configuration first: granaryd reads the queue with scontrol, which
# finds it through SLURM_CONF in granaryd's environment.
write_slurm_conf "BurstBufferType=burst_buffer/lua
SchedulerParameters=bf_interval=2"
cat >"${tmp}/granaryd.yaml" <<CONFIG
stage_in_poll_ms: 300
socket_mode: 0666
capacity: 96MiB
hold_share: 0.5
active_after_seconds: 2
fill: none
CONFIG
start_granary_cluster "${granaryd}" "${granary}" "${tmp}/granaryd.yaml"

mkdir -p "${tmp}/source/dsB/train"
head -c $((8 << 20)) /dev/urandom >"${tmp}/source/dsB/train/a.bin"
head -c $((4 << 20)) /dev/urandom >"${tmp}/source/dsB/train/b.bin"
head -c 1025 /dev/urandom >"${tmp}/source/dsB/labels.txt"
dsB_bytes=$(((8 << 20) + (4 << 20) + 1025))
# dsX: prewarmed and never held; dsC: more than rack-a's two caches hold; dsE:
# half of it (its share in rack-a) is over a node's hold share with dsB's.
mkdir -p "${tmp}/source/dsX" "${tmp}/source/dsC" "${tmp}/source/dsE"
head -c $((12 << 20)) /dev/urandom >"${tmp}/source/dsX/x.bin"
for i in $(seq 30); do head -c $((8 << 20)) /dev/urandom >"${tmp}/source/dsC/c${i}.bin"; done
head -c $((90 << 20)) /dev/urandom >"${tmp}/source/dsE/e.bin"
for dataset in dsB dsX dsC dsE; do
  "${granary}" dataset add "${dataset}" "${tmp}/source/${dataset}" >/dev/null
done
"${granary}" prewarm dsX --group rack-a --json >/dev/null

cp "${hooks}/burst_buffer.lua" "${tmp}/etc/"
: >"${tmp}/etc/burst_buffer.conf"
# For burst_buffer.lua, which runs in slurmctld's environment.
export GRANARY="${granary}" GRANARY_HOOK_LOG="${tmp}/jobs/hook.log" GRANARY_STAGE_IN_MAX_WAIT=20
mkdir -p "${tmp}/jobs"
chmod 777 "${tmp}/jobs"
start_slurm

job_state() { scontrol show job "$1" | grep -oE 'JobState=[A-Z_]+' | cut -d= -f2; }
job_done() { [[ "$(job_state "$1")" =~ ^(COMPLETED|FAILED|CANCELLED|TIMEOUT)$ ]]; }
# A stage-in's field as JSON: stage_in JOB EXPRESSION (Python, over `s`).
stage_in() {
  "${granary}" stage-in ls --json | /usr/bin/python3 -c '
import json, sys
s = next((s for s in json.load(sys.stdin)["stage_ins"] if s["job_id"] == sys.argv[1]), None)
print(json.dumps(eval(sys.argv[2])) if s else "null")' "$1" "$2"
}
source_bytes() {
  "${granary}" status --json | /usr/bin/python3 -c \
    'import json, sys; print(sum(n["bytes_from_source"] for n in json.load(sys.stdin)["nodes"]))'
}

# --- Job A holds the node; job B waits behind it with dsB.
cat >"${tmp}/jobs/a.sh" <<JOB
#!/bin/bash
sleep 60
date +%s.%N >'${tmp}/jobs/a.end'
JOB
cat >"${tmp}/jobs/b.sh" <<JOB
#!/bin/bash
#BB_LUA granary dsB
date +%s.%N >'${tmp}/jobs/b.start'
total=0
for path in train/a.bin train/b.bin labels.txt; do
  bytes=\$(env -u GRANARY_TOKEN_FILE '${granary}' --server 'unix:${tmp}/granaryd-localhost.sock' \
    cat "dsB/\${path}" | wc -c)
  total=\$((total + bytes))
done
echo "\${total}" >'${tmp}/jobs/b.read'
JOB
chmod 755 "${tmp}"/jobs/*.sh
job_a="$(submit a -c 2 --time=2)" || fail "sbatch refused job A"
a_running() { [[ "$(job_state "${job_a}")" == RUNNING ]]; }
wait_for 30 a_running || fail "job A did not start: $(scontrol show job "${job_a}")"
job_b="$(submit b -c 2 --time=1)" || fail "sbatch refused job B"

# While A runs, B's forecast is rack-a and dsB gets cached there.
b_cached() {
  [[ "$(stage_in "${job_b}" '[s["state"], s["groups"], [(t["group"], t["state"]) for t in s["targets"]]]')" == \
     '["planned", ["rack-a"], [["rack-a", "cached"]]]' ]]
}
wait_for 20 b_cached || fail "dsB not staged for job ${job_b}: $("${granary}" stage-in ls)"
[[ "$(job_state "${job_a}")" == RUNNING ]] || fail "job A ended before dsB was staged"
[[ "$(job_state "${job_b}")" == PENDING ]] || fail "job B is not pending: $(job_state "${job_b}")"
[[ ! -e "${tmp}/jobs/a.end" ]] || fail "job A ended before dsB was staged"
"${granary}" locate dsB --fresh --json | /usr/bin/python3 -c '
import json, sys
locate = json.load(sys.stdin)
groups = {g["group"]: g for g in locate["groups"]}
assert groups["rack-a"]["fraction"] == 1.0, groups
assert groups.get("rack-b", {"cached_bytes": 0})["cached_bytes"] == 0, groups' ||
  fail "dsB is not in rack-a alone: $("${granary}" locate dsB --fresh --json)"
bbstat="$(scontrol show bbstat)"
grep -qE "^${job_b} +planned .* dsB +rack-a .* 100(\.0)?% +cached" <<<"${bbstat}" ||
  fail "bbstat does not show B's staging: ${bbstat}"

# rack-a's share of a dataset, from a fresh locate: rack_a_fraction NAME
rack_a_fraction() {
  "${granary}" locate "$1" --fresh --json | /usr/bin/python3 -c '
import json, sys
print({g["group"]: g["fraction"] for g in json.load(sys.stdin)["groups"]}.get("rack-a", 0.0))'
}
# The holders of NAME's holds, by node: holders NAME
holders() {
  "${granary}" holds --json | /usr/bin/python3 -c '
import json, sys
print(sorted((n["node_id"], h["holder"]) for n in json.load(sys.stdin)["nodes"]
             for h in n["holds"] if h["dataset"] == sys.argv[1]))' "$1"
}

# --- Holds while B pends: dsB is held on both members of rack-a.
b_held() {
  [[ "$(holders dsB)" == "[('localhost', 'slurm:${job_b}'), ('peer-a', 'slurm:${job_b}')]" ]] &&
    [[ "$(stage_in "${job_b}" 's["hold"]')" == '"held"' ]]
}
wait_for 20 b_held || fail "dsB is not held for job ${job_b}: $("${granary}" holds)"
"${granary}" holds | grep -q "slurm:${job_b}" || fail "granary holds does not list B's hold"

# --- localhost's granaryd killed while B pends: restarted, it follows B again
# (its journal), with B's dataset cached and held in rack-a.
restart_granaryd localhost
stage_in "${job_b}" 's["state"]' | grep -qE '"(forecast|planned)"' ||
  fail "job ${job_b}'s stage-in did not survive the restart: $("${granary}" stage-in ls)"
wait_for 20 b_cached || fail "job ${job_b}'s stage-in is not back after the restart: $("${granary}" stage-in ls)"
wait_for 20 b_held || fail "dsB is not held again after the restart: $("${granary}" holds)"
grep -q "following job ${job_b} again for dsB" "${tmp}/log/granaryd-localhost" ||
  fail "granaryd did not log following job ${job_b} again"

# Job E's hold would pass the share: refused, naming B's hold; E reads through.
cat >"${tmp}/jobs/e.sh" <<JOB
#!/bin/bash
#BB_LUA granary dsE
true
JOB
chmod 755 "${tmp}/jobs/e.sh"
job_e="$(submit e -c 2 --time=1)" || fail "sbatch refused job E"
e_refused() { stage_in "${job_e}" 's["hold"]' | grep -q "refused: .*hold_share 0.5 of 96.0 MiB.*'dsB' for slurm:${job_b}"; }
wait_for 20 e_refused || fail "job E's hold was not refused naming B's: $("${granary}" stage-in ls)"
[[ "$(holders dsE)" == "[]" ]] || fail "dsE is held: $("${granary}" holds)"
scontrol show bbstat | grep -q "job ${job_e}: hold refused" || fail "bbstat does not show E's refusal"
scancel "${job_e}"
e_ended() { [[ "$(stage_in "${job_e}" 's["state"]')" == '"ended"' ]]; }
wait_for 20 e_ended || fail "job E's stage-in did not end once cancelled: $("${granary}" stage-in ls)"

# A reader C of dsC, more than rack-a holds, once dsX and dsB are past their
# activity: dsX goes, held dsB stays.
[[ "$(rack_a_fraction dsX)" == 1.0 ]] || fail "dsX is not whole in rack-a before reader C"
sleep 3
read_all() {  # read_all NAME: every file of NAME through localhost's granaryd
  local path
  for path in "${tmp}/source/$1"/*; do
    "${granary}" cat "$1/$(basename "${path}")" >/dev/null || fail "reading ${path} failed"
  done
}
read_all dsC
[[ "$(rack_a_fraction dsB)" == 1.0 ]] || fail "reader C evicted held dsB: $(rack_a_fraction dsB)"
/usr/bin/python3 -c 'import sys; assert float(sys.argv[1]) < 1.0' "$(rack_a_fraction dsX)" ||
  fail "reader C evicted nothing of unheld dsX: the cache was not under pressure"
[[ "$(job_state "${job_b}")" == PENDING ]] || fail "job B is no longer pending after reader C"

source_before="$(source_bytes)"
wait_for 90 job_done "${job_b}" || fail "job B did not finish: $(scontrol show job "${job_b}")"
[[ "$(job_state "${job_b}")" == COMPLETED ]] || fail "job B: $(scontrol show job "${job_b}")"
[[ "$(cat "${tmp}/jobs/b.read")" == "${dsB_bytes}" ]] ||
  fail "job B read $(cat "${tmp}/jobs/b.read") bytes of ${dsB_bytes}"
[[ "$(source_bytes)" == "${source_before}" ]] ||
  fail "job B's first epoch read $(($(source_bytes) - source_before)) bytes from the source"
/usr/bin/python3 -c 'import sys; a, b = (float(open(p).read()) for p in sys.argv[1:]); assert b > a' \
  "${tmp}/jobs/a.end" "${tmp}/jobs/b.start" || fail "job B started before job A ended"
grep -q "JobId=${job_b} staging 'dsB' while it waits" "${tmp}/jobs/hook.log" ||
  fail "no data_in line for job B"
grep -q "JobId=${job_b} topped up 'dsB'" "${tmp}/jobs/hook.log" || fail "no pre_run line for job B"
b_ended() { [[ "$(stage_in "${job_b}" 's["state"]')" == '"ended"' ]]; }
wait_for 20 b_ended || fail "job B's stage-in did not end: $("${granary}" stage-in ls)"
b_released() { [[ "$(holders dsB)" == "[]" ]]; }
wait_for 20 b_released || fail "B's hold was not released: $("${granary}" holds)"
# Released and past its activity, dsB's space goes to reader C.
sleep 3
read_all dsC
/usr/bin/python3 -c 'import sys; assert float(sys.argv[1]) < 1.0' "$(rack_a_fraction dsB)" ||
  fail "reader C could not take released dsB's space"
echo "job B started $(/usr/bin/python3 -c 'import sys; a, b = (float(open(p).read()) for p in sys.argv[1:]); print("%.1f" % (b - a))' \
  "${tmp}/jobs/a.end" "${tmp}/jobs/b.start") s after job A ended"

# --- An unknown dataset: the job runs; its stage-in names the dataset.
cat >"${tmp}/jobs/unknown.sh" <<JOB
#!/bin/bash
#BB_LUA granary nosuch
true
JOB
chmod 755 "${tmp}/jobs/unknown.sh"
job_u="$(submit unknown --time=1)" || fail "sbatch refused the job naming an unknown dataset"
wait_for 90 job_done "${job_u}" || fail "job ${job_u} did not finish: $(scontrol show job "${job_u}")"
[[ "$(job_state "${job_u}")" == COMPLETED ]] || fail "job ${job_u}: $(job_state "${job_u}")"
stage_in "${job_u}" 's["targets"][0]["state"] + ": " + s["targets"][0]["error"]' | grep -q '"failed: .*nosuch' ||
  fail "the unknown dataset is not named: $("${granary}" stage-in ls)"

# --- Only administrators and members start stage-ins.
if output="$(runuser -u nobody -- env -u GRANARY_TOKEN_FILE "${granary}" \
    --server "unix:${tmp}/granaryd-localhost.sock" stage-in start 99 dsB 2>&1)"; then
  fail "user nobody started a stage-in: ${output}"
fi
grep -q "StartStageIn" <<<"${output}" || fail "nobody's refusal does not name the call: ${output}"
if env -u GRANARY_TOKEN_FILE "${granary}" stage-in start 99 dsB >/dev/null 2>&1; then
  fail "a TCP caller without the token started a stage-in"
fi

# --- The hook's stage-in call returns in under a second whatever granaryd does.
hook_call() {  # hook_call SERVER: the seconds data_in's command takes
  /usr/bin/python3 - "$1" "${granary}" <<'TIME'
import subprocess, sys, time
start = time.monotonic()
subprocess.run("timeout -k 0.1 0.8 %s --server %s stage-in start 7 dsB --timeout-ms 600"
               % (sys.argv[2], sys.argv[1]), shell=True, capture_output=True)
print("%.3f" % (time.monotonic() - start))
TIME
}
silent_port="$(free_port)"
/usr/bin/python3 -c '
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(16)
held = []
while True:
    held.append(s.accept()[0])' "${silent_port}" &
pids+=($!)
for server in "127.0.0.1:$(free_port)" "127.0.0.1:${silent_port}"; do
  seconds="$(hook_call "${server}")"
  /usr/bin/python3 -c 'import sys; assert float(sys.argv[1]) < 1.0' "${seconds}" ||
    fail "data_in's call to ${server} took ${seconds} s"
done

# --- With the hooks' granaryd stopped, a burst buffer job still runs.
kill -TERM "${pids[-1]}"
kill -TERM "${granaryd_pid[localhost]}"
wait_for 10 bash -c "! kill -0 ${granaryd_pid[localhost]}" || fail "granaryd localhost did not stop"
cat >"${tmp}/jobs/down.sh" <<JOB
#!/bin/bash
#BB_LUA granary dsB
true
JOB
chmod 755 "${tmp}/jobs/down.sh"
job_d="$(submit down --time=1)" || fail "sbatch refused the job with granaryd down"
wait_for 90 job_done "${job_d}" || fail "job ${job_d} is wedged: $(scontrol show job "${job_d}")"
[[ "$(job_state "${job_d}")" == COMPLETED ]] || fail "job ${job_d}: $(job_state "${job_d}")"
grep -q "JobId=${job_d} stage-in of 'dsB' not started" "${tmp}/jobs/hook.log" ||
  fail "no error line for job ${job_d}"

echo "PASS: job B's dataset was cached in its forecast group while job A ran and held there against reader C (across a SIGKILL of granaryd), and B's first epoch read nothing from the source; a hold past the share was refused naming B's; B's hold was released at its end; unknown datasets and a stopped granaryd never held a job"
