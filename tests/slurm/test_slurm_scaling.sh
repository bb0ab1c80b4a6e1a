#!/usr/bin/env bash
# The real-Slurm test: starts a private single-host Slurm cluster from the distribution's
# packages, submits studies with slurm/scaling.sh exactly as a cluster user would (the CPU
# backend, the tiny preset, 2, 4 and 8 tasks on one node), and checks the jobs' states and exit
# codes, the run reports and the scaling reports. Covers both launchers (srun --mpi=pmix, mpirun
# in the allocation), a failing claim, a failing run job, --dry-run, a bad sizes list and
# re-running one size; then an acceptance with slurm/accept.sh (a job a node and the merge job
# after it: a healthy node passes, a node with a corrupt GPU is the one drain line). Stops the
# daemons it started, whatever happens.
#
#   test_slurm_scaling.sh --moebench BUILD/moebench [--keep]
#
# Exit 0 passed, 1 failed, 77 skipped (not root, and no passwordless sudo to become root).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
bin=""
keep=0
while (($# > 0)); do
  case "$1" in
    --moebench) bin="${2:-}"; shift ;;
    --keep) keep=1 ;;
    *) echo "usage: $0 --moebench PATH [--keep]" >&2; exit 2 ;;
  esac
  shift
done
[[ -x "$bin" ]] || { echo "test_slurm_scaling: --moebench '$bin' is not executable" >&2; exit 2; }
bin="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"

args=(--moebench "$bin")
((keep)) && args+=(--keep)
# Slurm's daemons need root: become root through sudo when that needs no password, else skip.
if ((EUID != 0)); then
  sudo -n true 2>/dev/null && exec sudo -n -E bash "$0" "${args[@]}"
  echo "test_slurm_scaling: SKIPPED: needs root (or passwordless sudo) to run Slurm's daemons"
  exit 77
fi
# One deadline for everything, below ctest's timeout, so the cleanup trap always gets to run.
if [[ -z "${MOEBENCH_SLURM_TEST_INNER:-}" ]]; then
  export MOEBENCH_SLURM_TEST_INNER=1
  exec timeout -k 30 "${MOEBENCH_SLURM_TEST_TIMEOUT:-600}" bash "$0" "${args[@]}"
fi

# shellcheck source=tests/slurm/slurm_cluster.sh
source "$here/slurm_cluster.sh"
# A test run inside someone's Slurm job must not talk to that cluster.
while read -r v; do
  unset "$v"
done < <(compgen -e | grep -E '^(SLURM|SBATCH|SRUN|SALLOC)_' || true)

t0=$SECONDS
step() { echo "== [$((SECONDS - t0))s] $*"; }
die() {
  echo "test_slurm_scaling: FAIL: $*" >&2
  exit 1
}

step "installing Slurm and munge if missing"
slurm_install || die "could not install slurmctld slurmd slurm-client munge with apt-get"

tmp="$(mktemp -d /tmp/moebench-slurm.XXXXXX)"
chmod 711 "$tmp" # munged runs as the munge user and must reach its socket under here
cleanup() {
  local rc=$?
  trap - EXIT TERM INT
  if ((rc != 0)); then
    echo "---- failed (exit $rc): job logs and daemon logs follow" >&2
    for f in "$tmp"/*/logs/*.out "$tmp"/mismatch-*.out "$tmp"/cluster/log/*.log; do
      [[ -f "$f" ]] && { echo "---- $f" && tail -n 30 "$f"; } >&2
    done
    squeue 2>/dev/null >&2 || true
  fi
  slurm_stop "$tmp/cluster"
  if ((keep)); then echo "kept $tmp"; else rm -rf "$tmp"; fi
  echo "test_slurm_scaling: $( ((rc == 0)) && echo PASSED || echo FAILED) in $((SECONDS - t0)) s"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 143' TERM INT

step "starting munged, slurmctld and slurmd under $tmp/cluster"
slurm_start "$tmp/cluster" 8 || die "the Slurm cluster did not start"
node="$(hostname -s)"
scaling="$repo/slurm/scaling.sh"
run_args=(-- --preset deepseek-v3-tiny --ep 2 --warmup 1 --steps 2)

# --- submit-time behaviour: nothing reaches the queue ------------------------------------------
step "--dry-run --gpus 256,512,1024 --gpus-per-node 4"
out="$("$scaling" --dry-run --moebench "$bin" --gpus 256,512,1024 --gpus-per-node 4 \
  --study-dir "$tmp/dry" --time 30 "${run_args[@]}")"
echo "$out"
for n in 64 128 256; do
  grep -q -- "--nodes=$n --ntasks-per-node=4 .*moebench.sbatch" <<<"$out" ||
    die "dry run: no job of $n nodes"
done
[[ "$(grep -c 'sbatch --parsable' <<<"$out")" == 4 ]] || die "dry run: expected 4 sbatch lines"
# shellcheck disable=SC2016 # the literal placeholders of the dry run
grep -q -- '--dependency=afterok:$JOB_1:$JOB_2:$JOB_3 --kill-on-invalid-dep=yes .*report.sbatch' \
  <<<"$out" || die "dry run: no report job depending on the three runs"
[[ ! -e "$tmp/dry" ]] || die "dry run created the study directory"
slurm_queue_empty || die "dry run submitted jobs"

step "a sizes list that does not divide into nodes"
rc=0
err="$("$scaling" --moebench "$bin" --gpus 8,12 --gpus-per-node 8 --study-dir "$tmp/bad" \
  --time 10 "${run_args[@]}" 2>&1)" || rc=$?
echo "$err"
((rc == 2)) || die "bad sizes: exit $rc, expected 2"
grep -q "12 GPUs do not fill whole nodes of 8 GPUs" <<<"$err" || die "bad sizes: unclear message"
[[ ! -e "$tmp/bad" ]] || die "bad sizes: the study directory was created"
slurm_queue_empty || die "bad sizes: jobs were submitted"

# --- the pre-flight: each refusal is exit 2 with one line, before anything is made or queued --
# refuse NAME EXPECTED ARGS...: scaling.sh ARGS must exit 2 saying EXPECTED.
refuse() {
  local name=$1 expected=$2 rc=0 err
  shift 2
  err="$("$scaling" --moebench "$bin" --study-dir "$tmp/refused" "$@" 2>&1)" || rc=$?
  echo "$name: $err"
  ((rc == 2)) || die "pre-flight, $name: exit $rc, expected 2"
  grep -qF -- "$expected" <<<"$err" || die "pre-flight, $name: the message does not say '$expected'"
  grep -q "nothing was submitted" <<<"$err" || die "pre-flight, $name: does not say nothing was submitted"
  [[ ! -e "$tmp/refused" ]] || die "pre-flight, $name: the study directory was created"
  slurm_queue_empty || die "pre-flight, $name: jobs were submitted"
}
step "pre-flight refusals"
refuse "no --time" "--time is required" --gpus 2,4 "${run_args[@]}"
refuse "a bad moebench flag" "pre-flight at 2 GPUs: moebench: The following argument was not expected: --no-such-flag" \
  --gpus 2,4 --time 10 -- --preset deepseek-v3-tiny --no-such-flag
refuse "an EP that does not divide a size" "pre-flight at 2 GPUs: moebench: --ep 4 does not divide the 2 ranks" \
  --gpus 2,4 --time 10 -- --preset deepseek-v3-tiny --ep 4
refuse "--out in the run options" "the study writes each run's report" \
  --gpus 2,4 --time 10 "${run_args[@]}" --out x.json
refuse "an unknown partition" "--partition 'nope' is not a partition of this cluster (sinfo lists: debug gpu)" \
  --partition nope --gpus 2,4 --time 10 "${run_args[@]}"
refuse "a cpu study on a GPU partition" "partition gpu has GPUs (gres gpu:h200:8) but this study would run moebench's cpu backend" \
  --partition gpu --gpus 8,16 --time 10 "${run_args[@]}"
# The GPU type in the partition's gres gives the memory to plan with: an H200's 141 GB.
refuse "a model that does not fit the partition's GPUs" "but --gpu-memory gives 131.30 GiB" \
  --partition gpu --backend cuda --comm nccl --gpus 8,16 --time 10 -- --preset deepseek-v3 --ep 8
refuse "a model that does not fit --gpu-memory" "but --gpu-memory gives 40.00 GiB" \
  --dry-run --backend cuda --comm nccl --gpu-memory 40 --gpus 64,128 --time 10 -- \
  --preset deepseek-v3 --ep 64 --layers 4

step "pre-flight acceptances (dry runs): --cpu-study on the GPU partition, a single size"
out="$("$scaling" --dry-run --moebench "$bin" --partition gpu --cpu-study --gpus 8,16 \
  --study-dir "$tmp/cpu-study" --time 10 "${run_args[@]}")"
echo "$out"
[[ "$(grep -c 'sbatch --parsable' <<<"$out")" == 3 ]] || die "--cpu-study: expected 3 sbatch lines"
! grep -q -- "--gpus-per-node=" <<<"$out" || die "--cpu-study: a cpu study requested GPUs"
grep -q "^# pre-flight: moebench plan accepts the run options at 8,16 GPUs" <<<"$out" ||
  die "--cpu-study: the dry run does not say what the pre-flight checked"
out="$("$scaling" --dry-run --moebench "$bin" --gpus 4 --study-dir "$tmp/single" --time 10 \
  "${run_args[@]}")"
echo "$out"
[[ "$(grep -c 'sbatch --parsable' <<<"$out")" == 1 ]] || die "single size: expected 1 sbatch line"
! grep -q "report.sbatch" <<<"$out" || die "single size: a report job that must fail"
grep -q "one GPU count: no report job" <<<"$out" || die "single size: does not say why no report"

# --- three studies at once (the node runs one job at a time: the jobs are --exclusive) --------
# Prints the job ids of scaling.sh's "run job ID:" lines, then the report job's.
job_ids() { sed -n 's/^\(run\|report\) job \([0-9]*\):.*/\2/p' <<<"$1"; }

step "study 1: srun --mpi=pmix at 2, 4, 8 tasks, thresholds that pass"
out_srun="$("$scaling" --moebench "$bin" --gpus 2,4,8 --gpus-per-node 8 --study-dir "$tmp/srun" \
  --time 10 --min-tflops 1e-9 --min-efficiency 1e-9 "${run_args[@]}")"
echo "$out_srun"
mapfile -t srun_jobs < <(job_ids "$out_srun")
((${#srun_jobs[@]} == 4)) || die "study 1: expected 4 job ids, got ${srun_jobs[*]}"

step "study 2: mpirun at 2, 4 tasks, a claim that fails"
out_mpi="$(MOEBENCH_LAUNCHER=mpirun "$scaling" --moebench "$bin" --gpus 2,4 --gpus-per-node 8 \
  --study-dir "$tmp/mpirun" --time 10 --claim-tflops 1e9 "${run_args[@]}")"
echo "$out_mpi"
mapfile -t mpi_jobs < <(job_ids "$out_mpi")
((${#mpi_jobs[@]} == 3)) || die "study 2: expected 3 job ids, got ${mpi_jobs[*]}"

step "study 3: run jobs that fail (a rank dies at its third step), at 2 and 4 tasks"
out_fail="$("$scaling" --moebench "$bin" --gpus 2,4 --gpus-per-node 8 --study-dir "$tmp/fail" \
  --time 10 -- --preset deepseek-v3-tiny --ep 2 --warmup 1 --steps 5 --timeout 120 \
  --inject die:rank=1,step=2)"
echo "$out_fail"
mapfile -t fail_jobs < <(job_ids "$out_fail")
((${#fail_jobs[@]} == 3)) || die "study 3: expected 3 job ids, got ${fail_jobs[*]}"
grep -q "scontrol show job" <<<"$out_fail" || die "study 3: scaling.sh does not say how to see why"
grep -q "$tmp/fail/logs/" <<<"$out_fail" || die "study 3: scaling.sh does not say where logs are"

# Waits for job ID and checks "STATE EXITCODE".
expect_job() {
  local id=$1 want=$2 got
  got="$(slurm_wait_job "$id" 240)" || die "job $id did not end within 240 s"
  [[ "$got" == "$want" ]] || die "job $id ended $got, expected $want"
  echo "job $id: $got"
}
check_runs() {
  local dir=$1 launcher=$2
  shift 2
  local g id
  while (($# >= 2)); do
    g=$1 id=$2
    shift 2
    python3 "$here/check_study.py" run "$dir/runs/run-${g}gpus-job$id.json" --job "$id" \
      --gpus "$g" --partition debug --node "$node" || die "run report of job $id"
    grep -q "moebench.sbatch: $launcher " "$dir/logs/moebench-${g}gpus-$id.out" ||
      die "job $id was not launched with $launcher"
  done
}

step "moebench.sbatch submitted by hand to an allocation that does not match"
mismatch="$(MOEBENCH_BIN="$bin" MOEBENCH_GPUS_PER_NODE=4 sbatch --parsable --nodes=1 \
  --ntasks-per-node=2 --output="$tmp/mismatch-%j.out" "$repo/slurm/moebench.sbatch" \
  --preset deepseek-v3-tiny)"

step "waiting for study 1 (srun)"
for id in "${srun_jobs[@]:0:3}"; do expect_job "$id" "COMPLETED 0:0"; done
expect_job "${srun_jobs[3]}" "COMPLETED 0:0"
check_runs "$tmp/srun" srun 2 "${srun_jobs[0]}" 4 "${srun_jobs[1]}" 8 "${srun_jobs[2]}"
"$bin" validate "$tmp"/srun/runs/*.json || die "study 1: run reports do not validate"
python3 "$here/check_study.py" scaling "$tmp/srun/scaling.json" --repo "$repo" --gpus 2,4,8 \
  --jobs "$(IFS=,; echo "${srun_jobs[*]:0:3}")" --verdict PASS || die "study 1: scaling report"
[[ -s "$tmp/srun/scaling.md" ]] || die "study 1: no scaling.md"

step "waiting for study 2 (mpirun, failing claim)"
for id in "${mpi_jobs[@]:0:2}"; do expect_job "$id" "COMPLETED 0:0"; done
expect_job "${mpi_jobs[2]}" "FAILED 4:0"
check_runs "$tmp/mpirun" mpirun 2 "${mpi_jobs[0]}" 4 "${mpi_jobs[1]}"
"$bin" validate "$tmp"/mpirun/runs/*.json || die "study 2: run reports do not validate"
python3 "$here/check_study.py" scaling "$tmp/mpirun/scaling.json" --repo "$repo" --gpus 2,4 \
  --jobs "$(IFS=,; echo "${mpi_jobs[*]:0:2}")" --verdict FAIL || die "study 2: scaling report"

step "waiting for study 3 (failing runs)"
# srun (--kill-on-bad-exit) sends the survivors SIGTERM and SIGKILL only after KillWait; a
# survivor still waiting for the dead rank gives up 20 s after the SIGTERM (exit 7), long before
# its --timeout of 120 s.
for i in 0 1; do
  got="$(slurm_wait_job "${fail_jobs[$i]}" 240)" || die "job ${fail_jobs[$i]} did not end"
  [[ "$got" == FAILED* ]] || die "study 3: run job ${fail_jobs[$i]} ended $got, expected FAILED"
  echo "job ${fail_jobs[$i]}: $got"
done
(( SECONDS - t0 < 200 )) || die "study 3: the failing runs waited for their --timeout"
# The dependency can never be satisfied, so --kill-on-invalid-dep cancels the report job.
expect_job "${fail_jobs[2]}" "CANCELLED 0:0"
scontrol show job -o "${fail_jobs[2]}" | grep -q "Reason=DependencyNeverSatisfied" ||
  die "study 3: the report job was not cancelled for its dependency"
[[ ! -e "$tmp/fail/scaling.json" ]] || die "study 3: a scaling report was written"
# Rank 0 outlived the dead rank: its report of the timed steps that finished says failed (or
# interrupted, when the launcher's SIGTERM came first).
for g in 2 4; do
  python3 "$here/check_study.py" failed "$tmp/fail/runs/"run-${g}gpus-job*.json ||
    die "study 3: the failed run's report at $g tasks"
done

step "waiting for the mismatched job"
expect_job "$mismatch" "FAILED 2:0"
grep -q "the job has 2 tasks per node but MOEBENCH_GPUS_PER_NODE=4" "$tmp/mismatch-$mismatch.out" ||
  die "the mismatched job's log does not say what is wrong"

step "re-running 4 tasks into study 2 (--only 4 --replace), thresholds that pass"
out_only="$("$scaling" --moebench "$bin" --launcher mpirun --gpus-per-node 8 \
  --study-dir "$tmp/mpirun" --only 4 --replace --time 10 --min-tflops 1e-9 "${run_args[@]}")"
echo "$out_only"
mapfile -t only_jobs < <(job_ids "$out_only")
((${#only_jobs[@]} == 2)) || die "re-run: expected 2 job ids, got ${only_jobs[*]}"
expect_job "${only_jobs[0]}" "COMPLETED 0:0"
expect_job "${only_jobs[1]}" "COMPLETED 0:0"
check_runs "$tmp/mpirun" mpirun 4 "${only_jobs[0]}"
[[ -e "$tmp/mpirun/superseded/run-4gpus-job${mpi_jobs[1]}.json" ]] ||
  die "re-run: the earlier 4-task report was not moved to superseded/"
python3 "$here/check_study.py" scaling "$tmp/mpirun/scaling.json" --repo "$repo" --gpus 2,4 \
  --jobs "${mpi_jobs[0]},${only_jobs[0]}" --verdict PASS ||
  die "re-run: scaling report"

# --- acceptance: slurm/accept.sh, a job a node and the merge job after it ---------------------
accept_sh="$repo/slurm/accept.sh"
step "accept.sh --dry-run: a node job and a merge job (no fleet job on one node)"
out="$("$accept_sh" --dry-run --moebench "$bin" --nodes "$node" --gpus-per-node 4 --time 10 \
  --dir "$tmp/acc-dry" -- --system cpu)"
echo "$out"
[[ "$(grep -c 'sbatch --parsable' <<<"$out")" == 2 ]] || die "accept dry run: expected 2 sbatch lines"
grep -q -- "--dependency=afterany:\$JOB_0 .*accept-merge" <<<"$out" ||
  die "accept dry run: no merge job after the node's"
[[ ! -e "$tmp/acc-dry" ]] || die "accept dry run created its directory"
slurm_queue_empty || die "accept dry run submitted jobs"
accept_ids() { sed -n 's/^\(node\|merge\) job \([0-9]*\):.*/\2/p' <<<"$1"; }

step "accept.sh: a healthy node (srun), and a node with a corrupt GPU (mpirun, rank 1 of 4)"
out_ok="$("$accept_sh" --moebench "$bin" --nodes "$node" --gpus-per-node 4 --time 10 \
  --dir "$tmp/acc-ok" -- --system cpu)"
echo "$out_ok"
mapfile -t ok_jobs < <(accept_ids "$out_ok")
out_bad="$("$accept_sh" --moebench "$bin" --launcher mpirun --nodes "$node" --gpus-per-node 4 \
  --time 10 --dir "$tmp/acc-bad" -- --system cpu --inject sdc:rank=1)"
echo "$out_bad"
mapfile -t bad_jobs < <(accept_ids "$out_bad")
((${#ok_jobs[@]} == 2 && ${#bad_jobs[@]} == 2)) || die "accept: expected 2 job ids each"
expect_job "${ok_jobs[0]}" "COMPLETED 0:0"
expect_job "${ok_jobs[1]}" "COMPLETED 0:0"
"$bin" validate "$tmp/acc-ok/nodes/$node/accept.json" "$tmp/acc-ok/merged/accept.json" ||
  die "accept: the healthy node's reports do not validate"
[[ -f "$tmp/acc-ok/merged/drain.txt" && ! -s "$tmp/acc-ok/merged/drain.txt" ]] ||
  die "accept: the healthy node's merged drain.txt is missing or not empty"
# The node's job fails (exit 9); the merge runs anyway (afterany) and fails with it.
expect_job "${bad_jobs[0]}" "FAILED 9:0"
expect_job "${bad_jobs[1]}" "FAILED 9:0"
drain="$(cat "$tmp/acc-bad/merged/drain.txt")"
echo "drain.txt: $drain"
[[ "$(wc -l <<<"$drain")" == 1 && "$drain" == "scontrol update NodeName=$node State=DRAIN "* ]] ||
  die "accept: the corrupt node's drain.txt does not name $node alone"
grep -q "sdc_gemm" <<<"$drain" || die "accept: the drain reason is not the GEMM's corruption"

step "all checks passed"
