#!/usr/bin/env bash
# Submits a fleet's acceptance to Slurm: one accept.sbatch job per node, one across all of them,
# and a merge job that runs whatever happened to the others (--dependency=afterany) and ends
# with the verdict's exit code (0 passed, 9 a check failed: DIR/merged/drain.txt names the nodes).
set -euo pipefail

usage() {
  cat <<'EOF_USAGE'
usage: slurm/accept.sh (--nodes LIST | --partition P) --time T [options] [-- accept options]

Submits one accept.sbatch job per node (--nodelist=NODE --nodes=1), one job across every node
(unless --no-fleet-job, or a single node), and a merge job after all of them, whatever their
end (--dependency=afterany), which runs `moebench accept-merge` over their reports with
--nodes LIST: a node whose job wrote no report is a failure and is named in the drain list.

  --nodes LIST          the nodes, comma-separated or a Slurm hostlist (node[01-16])
  --partition P         the partition (with no --nodes: every node sinfo lists in it)
  --gpus-per-node N     tasks per node, one per GPU (default 8)
  --time T              each accept job's time limit (required)
  --dir DIR             where everything goes (default ./moebench-accept-<date>-<time>):
                        DIR/nodes/<node>/ a node's report, DIR/fleet/ the job across nodes,
                        DIR/merged/ the verdict (accept.json, accept.md, junit.xml, drain.txt),
                        DIR/logs/ the jobs' logs
  --no-fleet-job        per-node jobs only (no links or collectives across nodes)
  --launcher NAME       srun (default) or mpirun inside the allocation
  --moebench PATH       the binary (default: $MOEBENCH_BIN, moebench on PATH, or this
                        checkout's build/moebench); the path must be valid on the nodes
  --account A  --qos Q  --job-name NAME (default moebench-accept)
  --sbatch-arg ARG      one more sbatch option for every job (repeatable)
  --dry-run             print the sbatch commands instead of submitting them
  -h, --help

Everything after `--` goes to `moebench accept` (e.g. --backend cuda --comm nccl --duration 30m);
GPUs are requested with --gpus-per-node when it names --backend cuda.
EOF_USAGE
}

submitted=0
die() {
  echo "accept.sh: $*$( ((submitted)) || echo '; nothing was submitted')" >&2
  exit 2
}
need() { (($# >= 2)) || die "$1 needs a value"; }

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
node_list=""
partition=""
gpn=8
run_time=""
dir=""
fleet_job=1
launcher="${MOEBENCH_LAUNCHER:-srun}"
bin="${MOEBENCH_BIN:-}"
job_name=moebench-accept
slurm_args=()
dry_run=0
while (($# > 0)); do
  case "$1" in
    --nodes) need "$@"; node_list="$2"; shift ;;
    --partition) need "$@"; partition="$2"; slurm_args+=("--partition=$2"); shift ;;
    --gpus-per-node) need "$@"; gpn="$2"; shift ;;
    --time) need "$@"; run_time="$2"; shift ;;
    --dir) need "$@"; dir="$2"; shift ;;
    --no-fleet-job) fleet_job=0 ;;
    --launcher) need "$@"; launcher="$2"; shift ;;
    --moebench) need "$@"; bin="$2"; shift ;;
    --account | --qos) need "$@"; slurm_args+=("$1=$2"); shift ;;
    --job-name) need "$@"; job_name="$2"; shift ;;
    --sbatch-arg) need "$@"; slurm_args+=("$2"); shift ;;
    --dry-run) dry_run=1 ;;
    -h | --help) usage; exit 0 ;;
    --) shift; break ;;
    *) die "unknown option '$1' (moebench accept options go after --; see --help)" ;;
  esac
  shift
done
accept_args=("$@")
[[ -n "$run_time" ]] || die "--time is required: each accept job's time limit, e.g. --time 00:30:00"
[[ "$gpn" =~ ^[1-9][0-9]*$ ]] || die "--gpus-per-node '$gpn' is not a positive integer"
case "$launcher" in srun | mpirun) ;; *) die "--launcher '$launcher': use srun or mpirun" ;; esac
gpu_request=()
for a in "${accept_args[@]}"; do
  case "$a" in
    --out | --out=*) die "accept's $a: the jobs write to DIR/nodes/<node>/ and DIR/fleet/; leave it out" ;;
    cuda | --backend=cuda) gpu_request=(--gpus-per-node="$gpn") ;;
  esac
done

# A Slurm hostlist without Slurm (a dry run on a laptop): names and prefix[01-03,07] groups,
# separated by the commas outside brackets.
expand_hostlist() {
  local text=$1 item="" depth=0 ch i
  local items=()
  for ((i = 0; i < ${#text}; i++)); do
    ch="${text:i:1}"
    [[ "$ch" == "[" ]] && depth=$((depth + 1))
    [[ "$ch" == "]" ]] && depth=$((depth - 1))
    if [[ "$ch" == "," ]] && ((depth == 0)); then
      items+=("$item")
      item=""
    else
      item+="$ch"
    fi
  done
  items+=("$item")
  local prefix body suffix part lo hi n
  for item in "${items[@]}"; do
    [[ -n "$item" ]] || continue
    if [[ "$item" =~ ^([^[]*)\[([^]]*)\](.*)$ ]]; then
      prefix="${BASH_REMATCH[1]}" body="${BASH_REMATCH[2]}" suffix="${BASH_REMATCH[3]}"
      for part in ${body//,/ }; do
        lo="${part%-*}" hi="${part#*-}"
        for ((n = 10#$lo; n <= 10#$hi; n++)); do printf '%s%0*d%s\n' "$prefix" "${#lo}" "$n" "$suffix"; done
      done
    else
      echo "$item"
    fi
  done
}

# --- the nodes -------------------------------------------------------------------------------
nodes=()
if [[ -n "$node_list" ]]; then
  expanded="$(scontrol show hostnames "$node_list" 2>/dev/null || true)"
  [[ -n "$expanded" ]] || expanded="$(expand_hostlist "$node_list")"
  mapfile -t nodes < <(grep -v '^$' <<<"$expanded")
elif [[ -n "$partition" ]]; then
  # Nodes that can run a job now: a down or drained node's job would wait forever, and the
  # merge after it with it.
  mapfile -t nodes < <(sinfo -h -N -p "$partition" -t idle,mixed,allocated,completing -o %N \
    2>/dev/null | sort -u)
  ((${#nodes[@]} > 0)) || die "sinfo lists no node of partition '$partition' that can run a job"
  others="$(sinfo -h -N -p "$partition" -t down,drained,draining,fail,maint,reserved -o %N \
    2>/dev/null | sort -u | tr '\n' ' ')"
  [[ -z "$others" ]] || echo "accept.sh: left out (down, drained or reserved): $others" >&2
else
  die "give the nodes: --nodes LIST, or --partition P for all of its nodes"
fi
((${#nodes[@]} > 0)) || die "--nodes '$node_list' names no node"
((${#nodes[@]} > 1)) || fleet_job=0

# --- the binary and the directory ------------------------------------------------------------
if [[ -z "$bin" ]]; then
  bin="$(command -v moebench || true)"
  [[ -z "$bin" && -x "$here/../build/moebench" ]] && bin="$here/../build/moebench"
fi
[[ -n "$bin" && -x "$bin" ]] || die "no moebench binary: give --moebench PATH (or set MOEBENCH_BIN)"
[[ "$bin" == */* ]] && bin="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"
[[ -n "$dir" ]] || dir="$PWD/moebench-accept-$(date +%Y%m%d-%H%M%S)"
[[ "$dir" == /* ]] || dir="$PWD/$dir"
# Every node's directory exists before its job runs: a job that never wrote a report leaves an
# empty one, which the merge names.
if ((!dry_run)); then
  for n in "${nodes[@]}"; do mkdir -p "$dir/nodes/$n"; done
  mkdir -p "$dir/logs" "$dir/merged"
  ((fleet_job)) && mkdir -p "$dir/fleet"
else
  echo "# dry run: nothing is submitted; these lines would submit the acceptance"
fi
# A line for the user (a comment in a dry run, whose output is a script).
say() { if ((dry_run)); then echo "# $*"; else echo "$*"; fi; }

# Runs sbatch (leading NAME=value words are its environment) and prints the job id (sbatch's
# warnings go to stderr, not into the id); in a dry run prints the line that would, as
# VAR=$(...), then the placeholder $VAR: the caller shows every line but the last.
submit() {
  local var=$1 line
  shift
  if ((dry_run)); then
    line="$(printf '%q ' "$@")"
    line="${line//\\\$JOB_/\$JOB_}"
    echo "$var=\$(${line% })"
    echo "\$$var"
    return 0
  fi
  env "$@" | cut -d';' -f1
}
common=(MOEBENCH_BIN="$bin" MOEBENCH_LAUNCHER="$launcher")
ids=()
for n in "${nodes[@]}"; do
  id="$(submit "JOB_${#ids[@]}" "${common[@]}" MOEBENCH_ACCEPT_OUT="$dir/nodes/$n" sbatch \
    --parsable --export=ALL --job-name="$job_name-$n" --nodelist="$n" --nodes=1 \
    --ntasks-per-node="$gpn" "${gpu_request[@]}" --time="$run_time" "${slurm_args[@]}" \
    --output="$dir/logs/%x-%j.out" "$here/accept.sbatch" "${accept_args[@]}")" ||
    die "sbatch failed for node $n (submitted: ${ids[*]:-none})"
  ((dry_run)) && { sed '$d' <<<"$id"; id="${id##*$'\n'}"; } || submitted=1
  ids+=("$id")
  say "node job $id: $n -> $dir/nodes/$n/"
done
inputs=()
for n in "${nodes[@]}"; do inputs+=("$dir/nodes/$n"); done
if ((fleet_job)); then
  all="$(IFS=,; echo "${nodes[*]}")"
  id="$(submit JOB_FLEET "${common[@]}" MOEBENCH_ACCEPT_OUT="$dir/fleet" sbatch --parsable \
    --export=ALL --job-name="$job_name-fleet" --nodelist="$all" --nodes="${#nodes[@]}" \
    --ntasks-per-node="$gpn" "${gpu_request[@]}" --time="$run_time" "${slurm_args[@]}" \
    --output="$dir/logs/%x-%j.out" "$here/accept.sbatch" "${accept_args[@]}")" ||
    die "sbatch failed for the job across the nodes (submitted: ${ids[*]})"
  ((dry_run)) && { sed '$d' <<<"$id"; id="${id##*$'\n'}"; }
  ids+=("$id")
  inputs+=("$dir/fleet")
  say "fleet job $id: ${#nodes[@]} nodes -> $dir/fleet/"
fi
merge=("$bin" accept-merge "${inputs[@]}" --nodes "$(IFS=,; echo "${nodes[*]}")" --out "$dir/merged")
dep="$(IFS=:; echo "${ids[*]}")"
id="$(submit JOB_MERGE sbatch --parsable --export=ALL --job-name="$job_name-merge" \
  --dependency="afterany:$dep" --nodes=1 --ntasks=1 --time=00:10:00 "${slurm_args[@]}" \
  --output="$dir/logs/%x-%j.out" --wrap="$(printf '%q ' "${merge[@]}")")" ||
  die "sbatch failed for the merge job (submitted: ${ids[*]})"
((dry_run)) && { sed '$d' <<<"$id"; id="${id##*$'\n'}"; }
say "merge job $id: after ${ids[*]} -> $dir/merged/ (accept.json, accept.md, junit.xml, drain.txt)"
((dry_run)) && exit 0
cat <<EOF_DONE

The merge job's exit code is the verdict: 0 passed, 9 a check failed. Then:
  cat $dir/merged/accept.md           (every check, by node)
  cat $dir/merged/drain.txt           (one scontrol line per node to drain; run them yourself)
Logs: $dir/logs/<job name>-<job id>.out. Watch: squeue -j ${dep//:/,},${id##*$'\n'}
EOF_DONE
