# shellcheck shell=bash
# A private single-host Slurm cluster for tests, started from the distribution's packages:
# munged, slurmctld and slurmd, every file under one directory, on free ports. Sourced by
# test_slurm_scaling.sh. It works on a 2-core root container without systemd (slurm/README.md,
# "Tested by CI").
#
#   slurm_install            installs slurmctld slurmd slurm-client munge when missing
#   slurm_start DIR CPUS     writes DIR/etc/slurm.conf, starts the daemons, exports SLURM_CONF
#                            (DIR's parents must let the munge user through)
#   slurm_stop DIR           cancels every job and stops the daemons by their pid files
#   slurm_wait_job ID SECS   waits until job ID has ended; prints "STATE EXITCODE"

slurm_log() { echo "slurm-cluster: $*" >&2; }

slurm_install() {
  local missing=()
  command -v slurmctld >/dev/null || missing+=(slurmctld)
  command -v slurmd >/dev/null || missing+=(slurmd)
  command -v sbatch >/dev/null || missing+=(slurm-client)
  command -v munged >/dev/null || missing+=(munge)
  ((${#missing[@]} == 0)) && return 0
  slurm_log "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  local apt=(apt-get install -y --no-install-recommends "${missing[@]}")
  # A fresh CI image may have no package lists yet: update once and retry.
  timeout 300 "${apt[@]}" >/dev/null 2>&1 ||
    { timeout 300 apt-get update >/dev/null 2>&1 && timeout 300 "${apt[@]}" >/dev/null; }
}

# Prints a TCP port nobody listens on (the kernel picks it).
slurm_free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}

# Waits up to SECS seconds for COMMAND to succeed.
slurm_wait_for() {
  local secs=$1
  shift
  local end=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < end)) || return 1
    sleep 0.5
  done
}

slurm_queue_empty() { [[ -z "$(timeout 5 squeue -h -o %i)" ]]; }
slurm_node_idle() { [[ "$(sinfo -h -N -n "$(hostname -s)" -o %T 2>/dev/null)" == idle ]]; }

slurm_start() {
  local dir=$1 cpus=$2 host
  host="$(hostname -s)"
  mkdir -p "$dir"/{etc,state,spool,log,run,munge} || return 1
  # munged runs as the munge user and insists on a key and socket directory it owns, which every
  # client can traverse but nobody else can write.
  chmod 711 "$dir"
  chown munge:munge "$dir/munge"
  chmod 711 "$dir/munge"
  dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
  chown munge:munge "$dir/munge/munge.key"
  chmod 400 "$dir/munge/munge.key"
  # Every step checks itself: callers use `slurm_start ... || die`, where set -e is off.
  runuser -u munge -- munged --socket="$dir/munge/munge.socket.2" \
    --key-file="$dir/munge/munge.key" --pid-file="$dir/munge/munged.pid" \
    --log-file="$dir/munge/munged.log" --seed-file="$dir/munge/munged.seed" ||
    { slurm_log "munged did not start"; return 1; }

  local ctld_port slurmd_port
  ctld_port="$(slurm_free_port)" && slurmd_port="$(slurm_free_port)" || return 1
  # config_overrides lets the node declare more CPUs than the machine has (one per task);
  # without it the node is drained as INVALID_REG.
  cat >"$dir/etc/slurm.conf" <<EOF
ClusterName=moebench-test
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket.2
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerParameters=batch_sched_delay=0
SlurmdParameters=config_overrides
MpiDefault=pmix
ReturnToService=2
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
GresTypes=gpu
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus Boards=1 SocketsPerBoard=1 CoresPerSocket=$cpus ThreadsPerCore=1 State=UNKNOWN
NodeName=gpu-node-1 NodeAddr=127.0.0.2 CPUs=8 Gres=gpu:h200:8 State=DOWN Reason=no-slurmd
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=gpu-node-1 MaxTime=INFINITE State=UP
EOF
  # gpu-node-1 never runs a slurmd: its partition only shows GPUs in sinfo (scaling.sh's
  # pre-flight refuses a cpu-backend study there).
  : >"$dir/etc/gres.conf"
  export SLURM_CONF="$dir/etc/slurm.conf"
  slurmctld -i -f "$SLURM_CONF" || { slurm_log "slurmctld did not start"; return 1; }
  slurmd -f "$SLURM_CONF" || { slurm_log "slurmd did not start"; return 1; }
  if ! slurm_wait_for 60 slurm_node_idle; then
    slurm_log "the node did not become idle within 60 s:"
    sinfo -N -l >&2 || true
    tail -n 20 "$dir/log/slurmctld.log" "$dir/log/slurmd.log" >&2 || true
    return 1
  fi
  slurm_log "up: node $host with $cpus CPUs, slurmctld port $ctld_port, SLURM_CONF=$SLURM_CONF"
}

# Stops the daemon whose pid file is FILE if that pid is still NAME; SIGKILL after 20 s.
slurm_stop_pid() {
  local file=$1 name=$2 pid
  [[ -s "$file" ]] || return 0
  pid="$(tr -dc 0-9 <"$file")"
  [[ -n "$pid" && "$(cat "/proc/$pid/comm" 2>/dev/null)" == "$name" ]] || return 0
  kill -TERM "$pid" 2>/dev/null || return 0
  local end=$((SECONDS + 20))
  while [[ "$(cat "/proc/$pid/comm" 2>/dev/null)" == "$name" ]]; do
    if ((SECONDS >= end)); then
      slurm_log "$name ($pid) ignored SIGTERM for 20 s: killing it"
      kill -KILL "$pid" 2>/dev/null || true
      break
    fi
    sleep 0.2
  done
}

slurm_stop() {
  local dir=$1
  # Jobs first: slurmstepd and the tasks outlive a stopped slurmd.
  if [[ -n "${SLURM_CONF:-}" && -s "$dir/run/slurmctld.pid" ]]; then
    timeout 10 scancel --full --partition=debug 2>/dev/null || true
    slurm_wait_for 20 slurm_queue_empty || slurm_log "jobs still in the queue after 20 s"
  fi
  slurm_stop_pid "$dir/run/slurmd.pid" slurmd
  slurm_stop_pid "$dir/run/slurmctld.pid" slurmctld
  slurm_stop_pid "$dir/munge/munged.pid" munged
}

# Waits until job ID has left the queue's pending and running states; prints "STATE EXITCODE".
# Polls scontrol (there is no accounting here, and `sbatch --wait` reports 0 for a job cancelled
# by a failed dependency).
slurm_wait_job() {
  local id=$1 secs=$2 line state code
  local end=$((SECONDS + secs))
  while :; do
    line="$(scontrol show job -o "$id" 2>/dev/null || true)"
    state="$(sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' <<<"$line")"
    code="$(sed -n 's/.* ExitCode=\([0-9:]*\).*/\1/p' <<<"$line")"
    case "$state" in
      PENDING | RUNNING | CONFIGURING | COMPLETING | SUSPENDED | REQUEUED | RESIZING | "") ;;
      *)
        echo "$state $code"
        return 0
        ;;
    esac
    if ((SECONDS >= end)); then
      slurm_log "job $id still ${state:-unknown} after $secs s"
      echo "TIMEOUT -"
      return 1
    fi
    sleep 1
  done
}
