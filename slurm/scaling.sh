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
  --cpu-study            allow a study of the cpu backend on a partition that has GPUs (refused
                         otherwise: without --backend cuda it would not use them)
  --gpu-memory GIB       memory of one GPU, for the pre-flight's memory check (default: from the
                         partition's GPU type in sinfo's gres: h100, h200, b200, b300, gb200,
                         gb300; none found, no memory check)
  --moebench PATH        the binary (default: $MOEBENCH_BIN, moebench on PATH, or this
                         checkout's build/moebench); the path must be valid on the compute nodes
Slurm:
  --time T               the run jobs' time limit (required: a partition's default is rarely
                         what a study wants); Slurm sends SIGTERM 120 s before it and the
                         run writes its report of the steps that finished (status interrupted)
  --partition P  --account A  --qos Q
  --job-name NAME        prefix of the job names (default moebench)
  --sbatch-arg ARG       one more sbatch option for every job (repeatable), e.g. --constraint=x
The report job (see `moebench report --help`):
  --claim-tflops X  --claim-efficiency E  --min-tflops X  --min-efficiency E  --baseline N
  --claim-from-recipe    judge the runs' recipe's claim like for like (docs/claims.md)
  --claim-recipe NAME  --claim-gpus N   a claim about recipe NAME's stack, its efficiency's size
  --allow-mixed FIELD (repeatable)  --plot (also STUDY/scaling.png)
Other:
  --dry-run              print the sbatch commands instead of submitting them
  -h, --help

Everything after `--` is passed to `moebench run` (e.g. --preset deepseek-v3 --ep 8 --steps 20);
the study sets --out itself.

Nothing is submitted until everything is checked (also with --dry-run): these options, the
partition (sinfo), and moebench's options at every GPU count, by `moebench plan --world N` with
them (and --gpu-memory: the largest rank must fit). A study of one GPU count submits no report
job (a scaling report compares two or more): add sizes later with --only.
moebench.sbatch documents the environment variables the run jobs read (MOEBENCH_*).
EOF
}

submitted=0 # jobs in the queue: until then every failure says that nothing was submitted
die() {
  if ((submitted)); then
    echo "scaling.sh: $*" >&2
  else
    echo "scaling.sh: $*; nothing was submitted" >&2
  fi
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
cpu_study=0
gpu_memory=""
partition=""
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
    --cpu-study) cpu_study=1 ;;
    --gpu-memory) need "$@"; gpu_memory="$2"; shift ;;
    --moebench) need "$@"; bin="$2"; shift ;;
    --partition) need "$@"; partition="$2"; slurm_args+=("$1=$2"); shift ;;
    --account | --qos) need "$@"; slurm_args+=("$1=$2"); shift ;;
    --time) need "$@"; run_time=("--time=$2"); shift ;;
    --job-name) need "$@"; job_name="$2"; shift ;;
    --sbatch-arg) need "$@"; slurm_args+=("$2"); shift ;;
    --claim-tflops | --claim-efficiency | --min-tflops | --min-efficiency | --baseline | \
      --claim-recipe | --claim-gpus)
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
((${#run_time[@]} > 0)) || die "--time is required: the run jobs' time limit, e.g. --time 00:30:00 \
(without it the partition's default applies)"
for a in "${run_args[@]}"; do
  case "$a" in
    --out | --out=* | --step-log | --step-log=*)
      die "moebench run's $a: the study writes each run's report (STUDY/runs/); leave it out" ;;
  esac
done
if [[ -n "$gpu_memory" ]] && ! [[ "$gpu_memory" =~ ^[0-9]+([.][0-9]+)?$ ]]; then
  die "--gpu-memory '$gpu_memory': give the GiB of one GPU, e.g. 131 for an H200's 141 GB"
fi

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
# --- pre-flight: the partition, and moebench's options at every size, before anything exists --
# A line for the user (a comment in a dry run, whose output is a script).
note() { if ((dry_run)); then echo "# $*"; else echo "$*"; fi; }
cpu_backend=0
[[ -z "$backend" || "$backend" == cpu ]] && cpu_backend=1
gres=""
if partitions="$(sinfo -h -o '%P %G' 2>/dev/null)" && [[ -n "$partitions" ]]; then
  if [[ -n "$partition" ]]; then
    grep -q "^$partition[*]\? " <<<"$partitions" ||
      die "--partition '$partition' is not a partition of this cluster (sinfo lists:" \
        "$(cut -d' ' -f1 <<<"$partitions" | tr -d '*' | sort -u | tr '\n' ' '| sed 's/ $//'))"
    gres="$(awk -v p="$partition" '$1 == p || $1 == p "*" {print $2}' <<<"$partitions" |
      sort -u | tr '\n' ' ')"
  else
    gres="$(awk '$1 ~ /[*]$/ {print $2}' <<<"$partitions" | sort -u | tr '\n' ' ')"
  fi
else
  note "pre-flight: sinfo did not answer (no Slurm here?): the partition is not checked"
fi
where="partition ${partition:-(the default)}"
if [[ "$gres" == *gpu* ]] && ((cpu_backend && !cpu_study)); then
  die "$where has GPUs (gres ${gres% }) but this study would run moebench's cpu backend" \
    "(${backend:+--backend cpu}${backend:-no --backend given}): give --backend cuda --comm nccl" \
    "to measure the GPUs, or --cpu-study to run on the CPUs anyway"
fi
if [[ -z "$gpu_memory" && "$gres" == *gpu:* ]]; then
  # HBM per GPU in GiB (the vendors' GB: 80, 141, 180, 186, 288).
  case "$(grep -o 'gpu:[A-Za-z0-9_]*' <<<"$gres" | head -1 | cut -d: -f2 | tr 'A-Z' 'a-z')" in
    h100 | h800) gpu_memory=74.5 ;;
    h200) gpu_memory=131.3 ;;
    b200) gpu_memory=167.6 ;;
    gb200) gpu_memory=173.2 ;;
    b300 | gb300) gpu_memory=268.2 ;;
  esac
fi
# moebench plan at every size, with the run's options: the run jobs would fail the same way.
if [[ "$bin" == */* ]] || command -v "$bin" >/dev/null 2>&1; then
  plan=("$bin" plan)
  [[ -n "$backend" ]] && plan+=(--backend "$backend")
  [[ -n "$comm" ]] && plan+=(--comm "$comm")
  memory_note="no memory check (the cpu backend checks the host's memory when it starts)"
  if ((!cpu_backend)); then
    memory_note="no memory check: give --gpu-memory GIB"
    if [[ -n "$gpu_memory" ]]; then
      plan+=(--gpu-memory "$gpu_memory")
      memory_note="the largest rank fits in $gpu_memory GiB per GPU"
    fi
  fi
  # The options moebench.sbatch gives `moebench run` besides these (keep the two in step): the
  # model default and the MOEBENCH_* variables the jobs inherit.
  has_model=0
  for a in "${run_args[@]}"; do
    case "$a" in --preset | --preset=* | --model-config | --model-config=* | --recipe | --recipe=*) has_model=1 ;; esac
  done
  if [[ -n "${MOEBENCH_MODEL_CONFIG:-}" ]]; then
    plan+=(--model-config "$MOEBENCH_MODEL_CONFIG")
  elif [[ -n "${MOEBENCH_PRESET:-}" ]] || ((has_model == 0)); then
    plan+=(--preset "${MOEBENCH_PRESET:-deepseek-v3}")
  fi
  [[ -n "${MOEBENCH_EP:-}" ]] && plan+=(--ep "$MOEBENCH_EP")
  [[ -n "${MOEBENCH_STEPS:-}" ]] && plan+=(--steps "$MOEBENCH_STEPS")
  [[ -n "${MOEBENCH_WARMUP:-}" ]] && plan+=(--warmup "$MOEBENCH_WARMUP")
  [[ -n "${MOEBENCH_PRECISION:-}" ]] && plan+=(--precision "$MOEBENCH_PRECISION")
  read -r -a extra <<<"${MOEBENCH_EXTRA_ARGS:-}"
  plan+=("${extra[@]}")
  for g in "${sizes[@]}"; do
    if ! msg="$("${plan[@]}" --world "$g" "${run_args[@]}" 2>&1 >/dev/null)"; then
      die "pre-flight at $g GPUs: $(grep -m1 '^moebench:' <<<"$msg" || head -n1 <<<"$msg")" \
        "(checked with: ${plan[*]} --world $g ${run_args[*]})"
    fi
  done
  note "pre-flight: moebench plan accepts the run options at ${gpus_list} GPUs; $memory_note"
else
  note "pre-flight: no moebench binary here to check the run options with ($bin): skipped"
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
    submitted=1
    id="${id%%;*}"
    printf '%s\t%s\t%s\t%s\n' "$g" "$n" "$id" "$study/runs/run-${g}gpus-job$id.json" \
      >>"$study/jobs.tsv"
  fi
  ids+=("$id")
  ((dry_run)) && printf '# '
  echo "run job $id: $g GPUs on $n node(s), $tpn per node -> $study/runs/run-${g}gpus-job$id.json"
done

dep="$(IFS=:; echo "${ids[*]}")"
if ((${#sizes[@]} == 1)) && [[ -z "$only" ]]; then
  note "one GPU count: no report job (a scaling report compares two or more); add sizes to this"
  note "study with: $0 --study-dir $study --only <GPUs> [same options]"
  exit 0
fi
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
