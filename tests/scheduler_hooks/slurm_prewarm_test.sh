#!/bin/bash
# The Slurm hooks of scheduler_hooks/slurm, configured by deploy/slurm's
# slurm.conf.granary, against real daemons on localhost: munged (as
# the munge user), slurmctld and slurmd (Slurm 22.05) and a cluster of three
# granaryd in two cache groups with the cluster token, all on a temporary
# directory; the Slurm node "localhost" is Granary node "localhost" of rack-a,
# so prewarms land in rack-a (localhost and peer-a) and never in rack-b. granary-slurm-features publishes the cached dataset ds0
# as a node feature; a job submitted with --comment=granary:ds0,ds1 gets
# job_submit.lua's --prefer for ds0 (no node holds ds1 yet), PrologSlurmctld
# prewarms both onto the job's node before the job script starts, and the
# script finds ds1 fully cached (granary locate --json). A second job, of user
# nobody (Slurm refuses burst buffers to root), asks for ds2 with a
# "#BB_LUA granary ds2" directive: its data_in hands it to granaryd, which
# cannot read this queue (it was started before SLURM_CONF named it), so
# nothing follows a forecast and burst_buffer.lua's pre_run tops up all of
# ds2 before that job starts; it is then fully cached. Every daemon is stopped
# on exit, whatever happens.
#
# Usage: slurm_prewarm_test.sh GRANARYD GRANARY HOOKS_DIR SLURM_CONF_GRANARY
# Needs root (munged runs as the munge user, the daemons as root).
set -euo pipefail

granaryd="$1"
granary="$2"
hooks="$3"
conf_lines="$4"

source "$(dirname "$0")/slurm_test_lib.sh"

start_munge
# The hooks and the CLI ask localhost's granaryd over TCP, so every call needs
# the token (GRANARY_TOKEN_FILE).
start_granary_cluster "${granaryd}" "${granary}"
# Without the token, TCP calls are refused.
if env -u GRANARY_TOKEN_FILE "${granary}" status >/dev/null 2>&1; then
  fail "granaryd answered a TCP call without the token"
fi

# Two datasets: ds0 prewarmed now (it becomes a node feature), ds1 for the job.
mkdir -p "${tmp}/source/ds0" "${tmp}/source/ds1/train"
head -c $((2 << 20)) /dev/urandom >"${tmp}/source/ds0/a.bin"
head -c $((1 << 20)) /dev/urandom >"${tmp}/source/ds1/train/a.bin"
head -c $((5 << 20)) /dev/urandom >"${tmp}/source/ds1/train/b.bin"
head -c 4097 /dev/urandom >"${tmp}/source/ds1/labels.txt"
mkdir -p "${tmp}/source/ds2"
head -c $((3 << 20)) /dev/urandom >"${tmp}/source/ds2/c.bin"
"${granary}" dataset add ds0 "${tmp}/source/ds0" >/dev/null
"${granary}" dataset add ds1 "${tmp}/source/ds1" >/dev/null
"${granary}" dataset add ds2 "${tmp}/source/ds2" >/dev/null
"${granary}" prewarm ds0 --group rack-a --json >/dev/null
# granary-slurm-features reads what the nodes published: wait until the
# prewarm's bytes are in localhost's published figures.
ds0_bytes_by_node() {
  "${granary}" locate ds0 "$@" --json | /usr/bin/python3 -c \
    'import json, sys; print(sorted((n["node_id"], n["cached_bytes"]) for n in json.load(sys.stdin)["nodes"]))'
}
published_like_fresh() { [[ "$(ds0_bytes_by_node)" == "$(ds0_bytes_by_node --fresh)" ]]; }
wait_for 30 published_like_fresh || fail "ds0's published figures never matched a fresh locate"

# Slurm, configured in the temporary directory.
write_slurm_conf "$(grep -v '^#' "${conf_lines}" | grep . | sed "s|/etc/slurm/|${tmp}/etc/|")"
cp "${hooks}/job_submit.lua" "${hooks}/burst_buffer.lua" "${tmp}/etc/"
: >"${tmp}/etc/burst_buffer.conf"
# The prolog as installed, with this test's CLI, server, Slurm configuration
# and log.
cat >"${tmp}/etc/granary-prolog-slurmctld" <<PROLOG
#!/bin/bash
export GRANARY='${granary}' GRANARY_SERVER='${GRANARY_SERVER}' GRANARY_HOOK_LOG='${tmp}/order.log'
export GRANARY_TOKEN_FILE='${GRANARY_TOKEN_FILE}'
export SLURM_CONF='${tmp}/etc/slurm.conf'
exec '${hooks}/granary-prolog-slurmctld'
PROLOG
chmod 755 "${tmp}/etc/granary-prolog-slurmctld"
# The epilog too (slurm_receipt_test.sh checks the receipts it keeps).
cat >"${tmp}/etc/granary-epilog" <<EPILOG
#!/bin/bash
export GRANARY='${granary}' GRANARY_SERVER='${GRANARY_SERVER}' GRANARY_HOOK_LOG='${tmp}/epilog.log'
export GRANARY_TOKEN_FILE='${GRANARY_TOKEN_FILE}'
exec '${hooks}/granary-epilog'
EPILOG
chmod 755 "${tmp}/etc/granary-epilog"
export GRANARY_SLURM_FEATURES="${tmp}/slurm-features"
# For burst_buffer.lua, which runs in slurmctld's environment.
export GRANARY="${granary}" GRANARY_HOOK_LOG="${tmp}/bb/order.log"
mkdir -p "${tmp}/bb"
touch "${GRANARY_HOOK_LOG}"
chmod 777 "${tmp}/bb"
chmod 666 "${GRANARY_HOOK_LOG}"

start_slurm

# Node features: ds0 is cached, ds1 is not.
GRANARY="${granary}" "${hooks}/granary-slurm-features" >"${tmp}/log/features" 2>&1 ||
  fail "granary-slurm-features failed"
features="$(scontrol show node localhost | grep -o 'AvailableFeatures=[^ ]*')"
[[ "${features}" == "AvailableFeatures=granary_ds0" ]] || fail "node features: ${features}"
[[ "$(cat "${GRANARY_SLURM_FEATURES}")" == "granary_ds0" ]] || fail "features state file"

# The job: records when it starts and what it finds.
cat >"${tmp}/job.sh" <<JOB
#!/bin/bash
echo "job started" >>'${tmp}/order.log'
'${granary}' locate ds1 --fresh --json >'${tmp}/locate.json'
JOB
chmod 755 "${tmp}/job.sh"
job="$(sbatch --parsable --comment=granary:ds0,ds1 --output="${tmp}/log/job.out" "${tmp}/job.sh")" ||
  fail "sbatch refused the job"
# The job asks for no feature itself, so granary_ds0 is job_submit.lua's
# preference: Prefer= while the job waits, and Features= once slurmctld has
# placed it by that preference (a loaded machine can place it before
# scontrol looks).
shown="$(scontrol show job "${job}")"
grep -qE '(^|[[:space:]])(Prefer|Features)=granary_ds0([[:space:]]|$)' <<<"${shown}" ||
  fail "job_submit.lua did not set --prefer: ${shown}"
job_done() { scontrol show job "${job}" | grep -qE 'JobState=(COMPLETED|FAILED|CANCELLED|TIMEOUT)'; }
wait_for 90 job_done || fail "job ${job} did not finish: $(scontrol show job "${job}")"
scontrol show job "${job}" | grep -q 'JobState=COMPLETED' ||
  fail "job ${job} did not complete: $(scontrol show job "${job}")"

# The prewarm ran, and finished, before the job script started.
grep -q "prewarmed 'ds1'" "${tmp}/order.log" || fail "no prewarm in $(cat "${tmp}/order.log")"
order="$(grep -oE "prewarming 'ds1'|prewarmed 'ds1'|job started" "${tmp}/order.log" | paste -sd'|' -)"
[[ "${order}" == "prewarming 'ds1'|prewarmed 'ds1'|job started" ]] || fail "order: ${order}"

# Whether the job's `granary locate --json` ($1) found all $2 bytes in the
# Slurm node's cache group rack-a, spread over localhost and peer-a, and none
# in rack-b, which the job did not use.
fully_cached() {
  /usr/bin/python3 - "$1" "$2" <<'CHECK'
import json, sys
locate = json.load(open(sys.argv[1]))
total = locate["total_bytes"]
assert total == int(sys.argv[2]), total
groups = {g["group"]: g for g in locate["groups"]}
assert groups["rack-a"]["cached_bytes"] == total and groups["rack-a"]["fraction"] == 1.0, groups
assert groups.get("rack-b", {"cached_bytes": 0})["cached_bytes"] == 0, groups
nodes = {n["node_id"]: n for n in locate["nodes"]}
assert set(nodes) == {"localhost", "peer-a", "remote-b"}, nodes
assert nodes["localhost"]["cached_bytes"] + nodes["peer-a"]["cached_bytes"] == total, nodes
assert nodes["localhost"]["group_fraction"] == 1.0, nodes
assert nodes["remote-b"]["cached_bytes"] == 0 and nodes["remote-b"]["group_fraction"] == 0.0, nodes
CHECK
}
fully_cached "${tmp}/locate.json" $(((1 << 20) + (5 << 20) + 4097)) ||
  fail "ds1 not fully cached: $(cat "${tmp}/locate.json")"

# The burst buffer path: ds2 is cold until the job's pre_run.
/usr/bin/python3 -c 'import json, sys; assert all(g["cached_bytes"] == 0 for g in json.load(sys.stdin)["groups"])' \
  < <("${granary}" locate ds2 --json) || fail "ds2 is not cold"
cat >"${tmp}/bb/job.sh" <<JOB
#!/bin/bash
#BB_LUA granary ds2
echo "job started" >>'${tmp}/bb/order.log'
JOB
chmod 755 "${tmp}/bb/job.sh"
job="$(cd "${tmp}/bb" && runuser -u nobody -- sbatch --parsable --output="${tmp}/bb/job.out" \
  "${tmp}/bb/job.sh" 2>"${tmp}/log/sbatch")" || fail "sbatch refused the burst buffer job"
wait_for 90 job_done || fail "job ${job} did not finish: $(scontrol show job "${job}")"
scontrol show job "${job}" | grep -q 'JobState=COMPLETED' ||
  fail "job ${job} did not complete: $(scontrol show job "${job}")"
order="$(grep -oE "topping up 'ds2'|topped up 'ds2'|job started" "${tmp}/bb/order.log" | paste -sd'|' -)"
[[ "${order}" == "topping up 'ds2'|topped up 'ds2'|job started" ]] || fail "burst buffer order: ${order}"
"${granary}" locate ds2 --fresh --json >"${tmp}/locate_bb.json"
fully_cached "${tmp}/locate_bb.json" $((3 << 20)) ||
  fail "ds2 not fully cached: $(cat "${tmp}/locate_bb.json")"

echo "PASS: prolog job preferred granary_ds0, found ds1 prewarmed in its cache group; burst buffer job ran after ds2 was prewarmed; three granaryd with the cluster token"
