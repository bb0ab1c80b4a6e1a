#!/usr/bin/env bash
# Submits a moebench scaling study to Slurm: one run job per GPU count, then a report job that
# runs `moebench report` on their run reports once all of them have succeeded and ends with the
# report's exit code (4 when a claim or acceptance threshold fails).
set -euo pipefail

usage() {
  cat <<'EOF'
usage: slurm/scaling.sh [options] [-- moebench run options]

Submits one moebench.sbatch job per GPU count and a report.sbatch job that depends on them
(--dependency=afterok, --kill-on-invalid-dep=yes). Run reports go to STUDY/runs/, logs to
STUDY/logs/, the scaling report to STUDY/scaling.json and STUDY/scaling.md.

The study:
  --gpus LIST            GPU counts, comma-separated (default 256,512,1024); a count must fill
                         whole nodes, or be at most one node
  --gpus-per-node N      GPUs per node (default 8; 4 for GB200/GB300 trays)
  --study-dir DIR        where everything goes (default ./moebench-study-<date>-<time>)
  --only LIST            re-run these GPU counts into an existing --study-dir once its jobs have
                         ended, then report again over all its runs (earlier runs of the same
                         count are kept as repeats)
  --replace              with --only: move earlier reports of those counts to STUDY/superseded/
  --launcher NAME        srun (srun --mpi=pmix, default) or mpirun inside the allocation
                         (default: $MOEBENCH_LAUNCHER, else srun)
  --backend NAME         moebench --backend (default: $MOEBENCH_BACKEND, else the binary's,
                         cpu today); GPUs are requested with --gpus-per-node unless it is cpu
  --comm NAME            moebench --comm (default: $MOEBENCH_COMM, else the binary's, mpi)
  --no-gpu-request       never add --gpus-per-node (sites that give whole nodes' GPUs anyway)
  --moebench PATH        the binary (default: $MOEBENCH_BIN, moebench on PATH, or this
                         checkout's build/moebench); the path must be valid on the compute nodes
Slurm:
  --partition P  --account A  --qos Q  --time T (the run jobs' limit)
  --job-name NAME        prefix of the job names (default moebench)
  --sbatch-arg ARG       one more sbatch option for every job (repeatable), e.g. --constraint=x
The report job (see `moebench report --help`):
  --claim-tflops X  --claim-efficiency E  --min-tflops X  --min-efficiency E  --baseline N
  --claim-from-recipe    judge the largest size against the runs' --recipe
  --allow-mixed FIELD (repeatable)  --plot (also STUDY/scaling.png)
Other:
  --dry-run              print the sbatch commands instead of submitting them
  -h, --help

Everything after `--` is passed to `moebench run` (e.g. --preset deepseek-v3 --ep 8 --steps 20).
moebench.sbatch documents the environment variables the run jobs read (MOEBENCH_*).
EOF
}

die() {
  echo "scaling.sh: $*" >&2
  exit 2
}

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
invocation="$(printf '%q ' "$0" "$@")"
gpus_list="256,512,1024"
gpn=8
study=""
only=""
replace=0
launcher="${MOEBENCH_LAUNCHER:-srun}"
backend="${MOEBENCH_BACKEND:-}"
comm="${MOEBENCH_COMM:-}"
gpu_request=1
bin="${MOEBENCH_BIN:-}"
job_name=moebench
dry_run=0
slurm_args=()
run_time=()
report_args=()
plot=0

need() { (($# >= 2)) || die "$1 needs a value"; }
while (($# > 0)); do
  case "$1" in
    --gpus) need "$@"; gpus_list="$2"; shift ;;
    --gpus-per-node) need "$@"; gpn="$2"; shift ;;
    --study-dir) need "$@"; study="$2"; shift ;;
    --only) need "$@"; only="$2"; shift ;;
    --replace) replace=1 ;;
    --launcher) need "$@"; launcher="$2"; shift ;;
    --backend) need "$@"; backend="$2"; shift ;;
    --comm) need "$@"; comm="$2"; shift ;;
    --no-gpu-request) gpu_request=0 ;;
    --moebench) need "$@"; bin="$2"; shift ;;
    --partition | --account | --qos) need "$@"; slurm_args+=("$1=$2"); shift ;;
    --time) need "$@"; run_time=("--time=$2"); shift ;;
    --job-name) need "$@"; job_name="$2"; shift ;;
    --sbatch-arg) need "$@"; slurm_args+=("$2"); shift ;;
    --claim-tflops | --claim-efficiency | --min-tflops | --min-efficiency | --baseline)
      need "$@"; report_args+=("$1" "$2"); shift ;;
    --allow-mixed) need "$@"; report_args+=(--allow-mixed "$2"); shift ;;
    --claim-from-recipe) report_args+=(--claim-from-recipe) ;;
    --plot) plot=1 ;;
    --dry-run) dry_run=1 ;;
    -h | --help) usage; exit 0 ;;
    --) shift; break ;;
    *) die "unknown option '$1' (moebench run options go after --; see --help)" ;;
  esac
  shift
done
run_args=("$@")

# --- sizes and nodes -------------------------------------------------------------------------
[[ "$gpn" =~ ^[1-9][0-9]*$ ]] || die "--gpus-per-node '$gpn' is not a positive integer"
case "$launcher" in srun | mpirun) ;; *) die "--launcher '$launcher': use srun or mpirun" ;; esac
if [[ -n "$only" ]]; then
  [[ -n "$study" && -d "$study/runs" ]] ||
    die "--only re-runs into an existing study: give --study-dir DIR of an earlier submission"
  gpus_list="$only"
elif ((replace)); then
  die "--replace goes with --only"
fi
IFS=, read -r -a sizes <<<"$gpus_list"
((${#sizes[@]} > 0)) || die "--gpus is empty"
nodes=()
for g in "${sizes[@]}"; do
  [[ "$g" =~ ^[1-9][0-9]*$ ]] || die "GPU count '$g' in '$gpus_list' is not a positive integer"
  if ((g <= gpn)); then
    nodes+=(1)
  elif ((g % gpn == 0)); then
    nodes+=($((g / gpn)))
  else
    lo=$((g / gpn * gpn))
    die "$g GPUs do not fill whole nodes of $gpn GPUs: use $lo or $((lo + gpn))" \
      "(or set --gpus-per-node)"
  fi
done

# --- the binary and the study directory ------------------------------------------------------
if [[ -z "$bin" && -n "${MOEBENCH_CONTAINER_IMAGE:-}" ]]; then
  bin=moebench # on the image's PATH
elif [[ -z "$bin" ]]; then
  bin="$(command -v moebench || true)"
  [[ -z "$bin" && -x "$here/../build/moebench" ]] && bin="$here/../build/moebench"
fi
if [[ -n "$bin" && "$bin" == */* && -z "${MOEBENCH_CONTAINER_IMAGE:-}" ]]; then
  [[ -x "$bin" ]] || die "--moebench '$bin' is not an executable file"
  bin="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"
elif [[ -z "$bin" ]]; then
  ((dry_run)) || die "no moebench binary: give --moebench PATH (or set MOEBENCH_BIN)"
  bin=moebench
fi
[[ -n "$study" ]] || study="moebench-study-$(date +%Y%m%d-%H%M%S)"
if ((dry_run)); then
  [[ "$study" == /* ]] || study="$PWD/$study"
else
  mkdir -p "$study/runs" "$study/logs"
  study="$(cd "$study" && pwd)"
fi

# --- the jobs --------------------------------------------------------------------------------
# The jobs read their settings from MOEBENCH_* variables set on the sbatch command line (values
# with commas cannot go through --export=VAR=value), hence --export=ALL even where a site's
# SBATCH_EXPORT says otherwise.
env_common=(MOEBENCH_BIN="$bin" MOEBENCH_LAUNCHER="$launcher")
[[ -n "$backend" ]] && env_common+=(MOEBENCH_BACKEND="$backend")
[[ -n "$comm" ]] && env_common+=(MOEBENCH_COMM="$comm")
[[ -z "$backend" || "$backend" == cpu ]] && gpu_request=0

# Runs the command (leading NAME=value words are its environment) and prints sbatch's answer;
# in a dry run prints it instead, as a line of a script that would submit the study.
submit() {
  local var=$1 line
  shift
  line="$(printf '%q ' "$@")"
  line="${line//\\\$JOB_/\$JOB_}"
  echo "${line% }" >>"$log"
  if ((dry_run)); then
    echo "$var=\$(${line% })"
    return 0
  fi
  env "$@"
}

log=/dev/null
if ((!dry_run)); then
  log="$study/submissions.log"
  echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) $invocation" >>"$log"
fi
((dry_run)) && echo "# dry run: nothing is submitted; these lines would submit the study"

ids=()
for i in "${!sizes[@]}"; do
  g="${sizes[$i]}"
  n="${nodes[$i]}"
  tpn=$((g / n))
  if ((replace && !dry_run)); then
    mkdir -p "$study/superseded"
    for f in "$study/runs/run-${g}gpus-job"*.json; do
      if [[ -e "$f" ]]; then
        mv "$f" "$study/superseded/"
        echo "moved $f to $study/superseded/"
      fi
    done
  fi
  gres=()
  ((gpu_request)) && gres=(--gpus-per-node="$tpn")
  cmd=("${env_common[@]}" MOEBENCH_OUT_DIR="$study/runs" MOEBENCH_GPUS="$g"
    MOEBENCH_GPUS_PER_NODE="$tpn"
    sbatch --parsable --export=ALL --job-name="$job_name-${g}gpus" --nodes="$n"
    --ntasks-per-node="$tpn" "${gres[@]}" "${run_time[@]}" "${slurm_args[@]}"
    --output="$study/logs/%x-%j.out"
    "$here/moebench.sbatch" "${run_args[@]}")
  if ((dry_run)); then
    id="\$JOB_$((i + 1))"
    submit "${id#$}" "${cmd[@]}"
  else
    id="$(submit - "${cmd[@]}")" ||
      die "sbatch failed for $g GPUs (jobs already submitted: ${ids[*]:-none})"
    id="${id%%;*}"
    printf '%s\t%s\t%s\t%s\n' "$g" "$n" "$id" "$study/runs/run-${g}gpus-job$id.json" \
      >>"$study/jobs.tsv"
  fi
  ids+=("$id")
  ((dry_run)) && printf '# '
  echo "run job $id: $g GPUs on $n node(s), $tpn per node -> $study/runs/run-${g}gpus-job$id.json"
done

dep="$(IFS=:; echo "${ids[*]}")"
rep=("$study/runs" --out "$study/scaling.json" --markdown "$study/scaling.md")
((plot)) && rep+=(--plot "$study/scaling.png")
mounts=()
extra_mounts="${MOEBENCH_CONTAINER_MOUNTS:+,$MOEBENCH_CONTAINER_MOUNTS}"
[[ -n "${MOEBENCH_CONTAINER_IMAGE:-}" ]] &&
  mounts=(MOEBENCH_CONTAINER_MOUNTS="$study:$study$extra_mounts")
cmd=(MOEBENCH_BIN="$bin" "${mounts[@]}"
  sbatch --parsable --export=ALL --job-name="$job_name-report" --dependency="afterok:$dep"
  --kill-on-invalid-dep=yes "${slurm_args[@]}" --output="$study/logs/%x-%j.out"
  "$here/report.sbatch" "${rep[@]}" "${report_args[@]}")
if ((dry_run)); then
  submit JOB_REPORT "${cmd[@]}"
  echo "# report job \$JOB_REPORT: after ${ids[*]} succeed -> $study/scaling.json"
  exit 0
fi
rid="$(submit - "${cmd[@]}")" || die "sbatch failed for the report job (run jobs: ${ids[*]})"
rid="${rid%%;*}"
printf 'report\t-\t%s\t%s\n' "$rid" "$study/scaling.json" >>"$study/jobs.tsv"
echo "report job $rid: after ${ids[*]} succeed -> $study/scaling.json, $study/scaling.md"
cat <<EOF

Logs: $study/logs/<job name>-<job id>.out. Watch: squeue -j ${dep//:/,},$rid
The report job runs only if every run job succeeds; otherwise Slurm cancels it
(DependencyNeverSatisfied). To see why a job failed or waits:
  scontrol show job <job id>    (JobState, Reason, ExitCode)
  cat $study/logs/$job_name-<GPUs>gpus-<job id>.out
Then re-run one size: $0 --study-dir $study --only <GPUs> [same options]
EOF
