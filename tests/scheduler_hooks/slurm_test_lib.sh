# Sourced by the Slurm tests of scheduler_hooks/slurm (and bench/scheduler_hooks):
# real daemons on localhost in a temporary directory, ${tmp}, removed on exit
# with every daemon started here stopped, whatever happens.
#
#   start_munge                    munged as the munge user, with a key of its own
#   start_granary_cluster GRANARYD GRANARY [CONFIG]
#                                  three granaryd with the cluster token, on
#                                  loopback: "localhost" (the Slurm node) and
#                                  "peer-a" in cache group rack-a, "remote-b" in
#                                  rack-b (or granary_nodes, ID:GROUP each, if
#                                  set after sourcing); CONFIG, a granaryd
#                                  config file for all; exports GRANARY_SERVER
#                                  (the first one's TCP address) and
#                                  GRANARY_TOKEN_FILE;
#                                  granaryd_pid[ID] is each one's process id;
#                                  with granaryd_cgroup set (a cgroup v1
#                                  directory), they run in that cgroup
#   write_slurm_conf LINES         ${tmp}/etc/slurm.conf: one node "localhost"
#                                  with 2 CPUs (or each of slurm_nodes),
#                                  partition "debug", the backfill scheduler,
#                                  and LINES; exports SLURM_CONF; processes
#                                  tracked by slurm_proctrack and tasks
#                                  confined by slurm_task_plugin (set before:
#                                  proctrack/linuxproc and task/none unless the
#                                  test needs Slurm's cgroups)
#   start_slurm                    slurmctld and slurmd; waits for the node;
#                                  slurmctld_pid is slurmctld's process id
#   start_slurm_nodes              instead of start_slurm, with slurm_nodes
#                                  set (node names) before write_slurm_conf:
#                                  slurmctld, and each node's slurmd in a
#                                  network namespace of its own (node i at
#                                  ${net_prefix}.i.1, the host at
#                                  ${net_prefix}.i.254); waits for the nodes
#   fail MESSAGE                   prints MESSAGE and the logs' tails, exits 1
#   wait_for SECONDS COMMAND...    until COMMAND succeeds; 1 when it never did
#   submit NAME SBATCH_ARGS...     sbatch of ${tmp}/jobs/NAME.sh as nobody, its
#                                  output in ${tmp}/jobs/NAME.out; prints the
#                                  job id
#   job_field JOB KEY              KEY's value in scontrol's line for JOB
#
# cleanup_hooks: commands the exit runs first (unmounts, say).
# Needs root (munged runs as the munge user, the daemons as root).

tmp="$(mktemp -d)"
chmod 755 "${tmp}"
pids=()
cleanup_hooks=()
mkdir -p "${tmp}/log" "${tmp}/munge" "${tmp}/etc" "${tmp}/state" "${tmp}/spool" "${tmp}/source"

fail() {
  echo "FAIL: $*" >&2
  local log
  for log in "${tmp}"/log/* "${tmp}"/*.log "${tmp}"/*/*.log "${tmp}"/jobs/*.out; do
    [[ -f "${log}" ]] || continue
    echo "--- ${log}" >&2
    tail -n 30 "${log}" >&2 || true
  done
  exit 1
}

cleanup() {
  local pid i hook
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    kill -TERM "${pids[i]}" 2>/dev/null || true
  done
  for pid in "${pids[@]}"; do
    for _ in $(seq 50); do kill -0 "${pid}" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "${pid}" 2>/dev/null || true
  done
  if [[ -f "${tmp}/munge/munged.pid" ]]; then kill -KILL "$(cat "${tmp}/munge/munged.pid")" 2>/dev/null || true; fi
  # Job steps and their scripts outlive slurmd: end every process of this
  # test's cluster, known by the SLURM_CONF it inherited.
  for pid in $(grep -lx "SLURM_CONF=${tmp}/etc/slurm.conf" --null-data /proc/[0-9]*/environ 2>/dev/null |
    cut -d/ -f3); do
    kill -KILL "${pid}" 2>/dev/null || true
  done
  for hook in "${cleanup_hooks[@]}"; do eval "${hook}" || true; done
  rm -rf "${tmp}"
}
trap cleanup EXIT

[[ "$(id -u)" -eq 0 ]] || fail "needs root to run munged as munge and slurmd"
for tool in munged slurmctld slurmd sbatch scontrol; do
  command -v "${tool}" >/dev/null || fail "${tool} is not installed (scripts/install-deps.sh)"
done

free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

wait_for() {
  local seconds="$1"
  shift
  for _ in $(seq $((seconds * 10))); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.1
  done
  return 1
}

submit() {
  local name="$1"
  shift
  (cd "${tmp}/jobs" && runuser -u nobody -- sbatch --parsable --output="${tmp}/jobs/${name}.out" \
    "$@" "${tmp}/jobs/${name}.sh" 2>>"${tmp}/log/sbatch")
}

job_field() { scontrol show job -o "$1" | grep -oE "(^| )$2=[^ ]*" | head -n 1 | cut -d= -f2; }

start_munge() {
  dd if=/dev/urandom of="${tmp}/munge/munge.key" bs=1024 count=1 status=none
  chown -R munge:munge "${tmp}/munge"
  chmod 755 "${tmp}/munge"
  chmod 400 "${tmp}/munge/munge.key"
  runuser -u munge -- munged --foreground --socket="${tmp}/munge/munge.sock" \
    --key-file="${tmp}/munge/munge.key" --pid-file="${tmp}/munge/munged.pid" \
    --seed-file="${tmp}/munge/munged.seed" --log-file="${tmp}/munge/munged.log" \
    >"${tmp}/log/munged" 2>&1 &
  pids+=($!)
  wait_for 10 test -S "${tmp}/munge/munge.sock" || fail "munged did not start"
}

declare -A peer_port granaryd_pid
granary_nodes=(localhost:rack-a peer-a:rack-a remote-b:rack-b)

start_granaryd() {  # start_granaryd ID:GROUP, with start_granary_cluster's settings
  local spec="$1" id="${1%%:*}"
  "${granary_wrap[@]}" "${granaryd_binary}" ${granary_config:+--config "${granary_config}"} \
    --data-dir "${tmp}/granary-${id}" --socket "${tmp}/granaryd-${id}.sock" \
    --listen "127.0.0.1:${peer_port[${id}]}" --metrics-listen "127.0.0.1:$(free_port)" \
    --node-id "${id}" --group "${spec#*:}" --members "${tmp}/members.yaml" \
    --token-file "${GRANARY_TOKEN_FILE}" --source-root "${tmp}" --locality-period-ms 200 \
    >>"${tmp}/log/granaryd-${id}" 2>&1 &
  pids+=($!)
  granaryd_pid[${id}]=$!
}

restart_granaryd() {
  local id="$1" spec
  kill -KILL "${granaryd_pid[${id}]}"
  wait_for 10 bash -c "! kill -0 ${granaryd_pid[${id}]}" || fail "granaryd ${id} outlived SIGKILL"
  for spec in "${granary_nodes[@]}"; do
    [[ "${spec%%:*}" == "${id}" ]] && start_granaryd "${spec}"
  done
  wait_for 20 "${granary_cli}" --server "unix:${tmp}/granaryd-${id}.sock" status ||
    fail "granaryd ${id} did not start again"
}

start_granary_cluster() {
  local granaryd="$1" granary="$2" config="${3:-}" spec id wrap=()
  granary_cli="${granary}"
  if [[ -n "${granaryd_cgroup:-}" ]]; then
    wrap=(bash -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "${granaryd_cgroup}")
  fi
  (umask 077; head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"${tmp}/token")
  export GRANARY_TOKEN_FILE="${tmp}/token"
  echo "members:" >"${tmp}/members.yaml"
  for spec in "${granary_nodes[@]}"; do
    id="${spec%%:*}"
    peer_port[${id}]="$(free_port)"
    printf '  - id: %s\n    address: 127.0.0.1:%s\n    group: %s\n' "${id}" "${peer_port[${id}]}" \
      "${spec#*:}" >>"${tmp}/members.yaml"
  done
  granary_wrap=("${wrap[@]}")
  granary_config="${config}"
  granaryd_binary="${granaryd}"
  for spec in "${granary_nodes[@]}"; do start_granaryd "${spec}"; done
  export GRANARY_SERVER="127.0.0.1:${peer_port[${granary_nodes[0]%%:*}]}"
  for spec in "${granary_nodes[@]}"; do
    id="${spec%%:*}"
    wait_for 20 "${granary}" --server "unix:${tmp}/granaryd-${id}.sock" status ||
      fail "granaryd ${id} did not start"
  done
  members_up() {
    [[ "$("${granary}" status --json | grep -o '"node_id"' | wc -l)" -ge ${#granary_nodes[@]} ]]
  }
  wait_for 30 members_up || fail "the cluster did not form: $("${granary}" status --json)"
}

slurm_nodes=()
# A prefix of its own per run, so that tests running side by side do not share
# addresses.
net_prefix="10.$((64 + $$ % 128))"

write_slurm_conf() {
  local lines="$1" controller=localhost nodes="NodeName=localhost CPUs=2 State=UNKNOWN"
  local partition=localhost i
  if ((${#slurm_nodes[@]} > 0)); then
    controller="localhost(${net_prefix}.1.254)"
    nodes=""
    for i in "${!slurm_nodes[@]}"; do
      nodes+="NodeName=${slurm_nodes[i]} NodeAddr=${net_prefix}.$((i + 1)).1 CPUs=2 State=UNKNOWN"$'\n'
    done
    partition="$(IFS=,; echo "${slurm_nodes[*]}")"
  fi
  cat >"${tmp}/etc/slurm.conf" <<CONF
ClusterName=granarytest
SlurmctldHost=${controller}
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=${tmp}/munge/munge.sock
StateSaveLocation=${tmp}/state
SlurmdSpoolDir=${tmp}/spool/%n
SlurmctldPidFile=${tmp}/slurmctld.pid
SlurmdPidFile=${tmp}/slurmd-%n.pid
SlurmctldLogFile=${tmp}/log/slurmctld
SlurmdLogFile=${tmp}/log/slurmd-%n
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=${slurm_proctrack:-proctrack/linuxproc}
TaskPlugin=${slurm_task_plugin:-task/none}
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
${lines}
${nodes}
PartitionName=debug Nodes=${partition} Default=YES MaxTime=INFINITE State=UP
CONF
  export SLURM_CONF="${tmp}/etc/slurm.conf"
}

start_slurm() {
  slurmctld -D -i >"${tmp}/log/slurmctld.out" 2>&1 &
  pids+=($!)
  slurmctld_pid=$!
  mkdir -p "${tmp}/spool/localhost"
  slurmd -D -N localhost >"${tmp}/log/slurmd.out" 2>&1 &
  pids+=($!)
  wait_for 60 node_idle localhost || fail "slurm node localhost did not become idle"
}

node_idle() { scontrol show node "$1" | grep -q 'State=IDLE'; }

start_slurm_nodes() {
  local i node namespace host_end node_end
  for i in "${!slurm_nodes[@]}"; do
    node="${slurm_nodes[i]}"
    namespace="granary$$-${node}"
    host_end="gh$$n${i}"
    node_end="gn$$n${i}"
    ip netns add "${namespace}" || fail "cannot add network namespace ${namespace}"
    cleanup_hooks+=("ip netns del ${namespace}" "ip link del ${host_end} 2>/dev/null")
    ip link add "${host_end}" type veth peer name "${node_end}"
    ip link set "${node_end}" netns "${namespace}"
    ip addr add "${net_prefix}.$((i + 1)).254/24" dev "${host_end}"
    ip link set "${host_end}" up
    ip -n "${namespace}" addr add "${net_prefix}.$((i + 1)).1/24" dev "${node_end}"
    ip -n "${namespace}" link set "${node_end}" up
    ip -n "${namespace}" link set lo up
    ip -n "${namespace}" route add default via "${net_prefix}.$((i + 1)).254"
  done
  slurmctld -D -i >"${tmp}/log/slurmctld.out" 2>&1 &
  pids+=($!)
  slurmctld_pid=$!
  for node in "${slurm_nodes[@]}"; do
    mkdir -p "${tmp}/spool/${node}"
    # nsenter, unlike ip netns exec, keeps the host's /sys (and its cgroups).
    nsenter --net="/run/netns/granary$$-${node}" slurmd -D -N "${node}" \
      >"${tmp}/log/slurmd-${node}.out" 2>&1 &
    pids+=($!)
  done
  for node in "${slurm_nodes[@]}"; do
    wait_for 60 node_idle "${node}" || fail "slurm node ${node} did not become idle"
  done
}
