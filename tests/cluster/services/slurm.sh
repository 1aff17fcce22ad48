#!/usr/bin/env bash
# A single-node SLURM on 127.0.0.1 for the `cluster` tests: `slurm.sh start|stop` (as root).
#
# start: installs Debian's slurm-wlm and munge if missing, writes a munge key and a slurm.conf
# under $GRAMTILE_SERVICES/slurm/ (one node `localhost` at 127.0.0.1 with this machine's CPUs and
# memory, one partition `gramtile`; proctrack/linuxproc, task/none, no cgroups, no accounting;
# short timers so that a cancelled or timed-out job is acted on within seconds), starts munged,
# slurmctld and slurmd in the foreground as background processes (their PIDs in
# $GRAMTILE_SERVICES/slurm/*.pid), waits until `sinfo` shows the node idle, and writes
# $GRAMTILE_SERVICES/slurm.env:
#   SLURM_CONF=...        (export it: sbatch, squeue, scancel and the daemons read it)
#   SLURM_PARTITION=gramtile
#   SLURM_CPUS=2  SLURM_MEMORY_MB=...
# stop: kills those PIDs (and nothing else), removes slurm.env.
set -euo pipefail
export GRAMTILE_SERVICES="${GRAMTILE_SERVICES:-/tmp/gramtile-services}"
dir="$GRAMTILE_SERVICES/slurm"
env_file="$GRAMTILE_SERVICES/slurm.env"
partition=gramtile
ctld_port="${GRAMTILE_SLURMCTLD_PORT:-6817}"
slurmd_port="${GRAMTILE_SLURMD_PORT:-6818}"

log() { echo "slurm.sh: $*" >&2; }

stop() {
  rm -f "$env_file"
  [ -d "$dir" ] || return 0
  # slurmd first (it ends the job steps it runs), then slurmctld, then munged
  for name in slurmd slurmctld munged; do
    pidf="$dir/$name.pid"
    [ -f "$pidf" ] || continue
    pid="$(cat "$pidf")"
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$pidf"
  done
}

start() {
  if [ "$(id -u)" != 0 ]; then
    log "needs root (munged and slurmd run as root); the slurm tests will skip"
    return 0
  fi
  t0=$(date +%s.%N)
  if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v munged >/dev/null \
      || ! command -v sbatch >/dev/null; then
    log "installing slurm-wlm and munge (apt-get)"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
       slurm-wlm munge) >"$GRAMTILE_SERVICES/slurm-apt.log" 2>&1 \
      || { log "apt-get install slurm-wlm munge failed; see $GRAMTILE_SERVICES/slurm-apt.log"; exit 1; }
  fi
  t1=$(date +%s.%N)
  stop  # a previous instance of this script
  mkdir -p "$dir"/{state,spool,log,munge}
  chmod 700 "$dir/munge"
  # munge: our own key and socket, so a system munged (if any) is left alone
  if [ ! -s "$dir/munge/munge.key" ]; then
    dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
    chmod 400 "$dir/munge/munge.key"
  fi
  sock="$dir/munge/munge.socket"
  cpus="$(nproc)"
  total_mb=$(( $(awk '/^MemTotal:/ {print $2}' /proc/meminfo) / 1024 ))
  mem_mb=$(( total_mb * 9 / 10 ))  # leave room for the daemons and the driver
  cat >"$dir/slurm.conf" <<EOF
# written by tests/cluster/services/slurm.sh: one node on 127.0.0.1, no cgroups, no accounting
ClusterName=gramtile
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$sock
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/state/slurmctld.daemon.pid
SlurmdPidFile=$dir/spool/slurmd.daemon.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2,bf_interval=2
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
ReturnToService=2
# short timers: a cancelled or timed-out job ends within seconds
KillWait=2
MessageTimeout=5
OverTimeLimit=0
InactiveLimit=0
MinJobAge=600
SlurmctldTimeout=30
SlurmdTimeout=30
UnkillableStepTimeout=30
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN
PartitionName=$partition Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF
  export SLURM_CONF="$dir/slurm.conf"
  munged --foreground --force --key-file="$dir/munge/munge.key" --socket="$sock" \
    --pid-file="$dir/munge/munged.daemon.pid" --log-file="$dir/log/munged.log" \
    --seed-file="$dir/munge/munged.seed" >"$dir/log/munged.out" 2>&1 &
  echo $! >"$dir/munged.pid"
  for _ in $(seq 50); do [ -S "$sock" ] && break; sleep 0.1; done
  [ -S "$sock" ] || { log "munged did not start; see $dir/log/munged.log"; stop; exit 1; }
  slurmctld -D -c -f "$SLURM_CONF" >"$dir/log/slurmctld.out" 2>&1 &
  echo $! >"$dir/slurmctld.pid"
  slurmd -D -N localhost -f "$SLURM_CONF" >"$dir/log/slurmd.out" 2>&1 &
  echo $! >"$dir/slurmd.pid"
  # bounded wait for the node to be idle
  state=""
  for _ in $(seq 150); do
    state="$(sinfo -h -n localhost -o %t 2>/dev/null || true)"
    [ "$state" = idle ] && break
    for name in munged slurmctld slurmd; do
      kill -0 "$(cat "$dir/$name.pid")" 2>/dev/null \
        || { log "$name exited at start; see $dir/log/$name.log and $dir/log/$name.out"; stop; exit 1; }
    done
    sleep 0.2
  done
  if [ "$state" != idle ]; then
    log "the node did not become idle within 30 s (sinfo says '${state:-nothing}'); see $dir/log/"
    stop
    exit 1
  fi
  t2=$(date +%s.%N)
  cat >"$env_file" <<EOF
SLURM_CONF=$SLURM_CONF
SLURM_PARTITION=$partition
SLURM_CPUS=$cpus
SLURM_MEMORY_MB=$mem_mb
SLURM_LOG_DIR=$dir/log
EOF
  log "up: node localhost idle ($cpus CPUs, $mem_mb MB), partition $partition; install check $(
    awk "BEGIN {printf \"%.1f\", $t1 - $t0}") s, daemons $(awk "BEGIN {printf \"%.1f\", $t2 - $t1}") s;" \
      "SLURM_CONF=$SLURM_CONF"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
