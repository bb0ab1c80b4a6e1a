#!/usr/bin/env bash
# The device check: on a machine with one GPU and nothing installed beyond the CUDA toolkit,
# CMake, ninja and Python, build moebench with the dependencies tests/device/prepare.sh packed
# (tests/device/.cache/carry/deps.tar.gz), then, after two quick checks (`moebench plan` with the
# GPU runs' flags, cuDNN attention's graphs against cudnn-frontend's validation for this GPU),
# the steps in order of the value of their figures (tests/device/README.md gives each one's limit):
#   run_1gpu                 a BF16 --verify run on one GPU (a 2-layer DeepSeek-V3 with 16 experts
#                            and 512-token sequences, tests/device/deepseek-v3-device.json)
#   bench                    the performance probe (GEMM roofline, the experts' GEMMs, core
#                            attention, 1- and 4-layer stacks: the figure against a GPU's peak),
#                            at its full size when 200 s remain
#   gpu_tests                the cuda backend against the cpu backend
#   run_1gpu_fp8_blockwise   --precision fp8 --fp8-recipe blockwise (DeepSeek-V3's, Hopper)
#   run_1gpu_fp8             --precision fp8, per-tensor scaling
#   bench_fp8                the probe in FP8
#   run_4rank                4 ranks sharing the GPU, --comm mpi --ep 4
#   gpu_comm_tests           the communicators on device memory
#   run_1gpu_nccl            --comm nccl
#   run_4rank_pp             4 ranks, an interleaved pipeline (pp 2, vp 2, ep 2)
# and write what it measured into at most three files in the output folder, whatever happens:
#   summary.json     the one summary (tests/device/summarize.py; tests/device/README.md reads it)
#   check.log        every step's command line, output and time
#   results.tar.gz   the run and bench reports and the runs' step logs
# (the device call returns at most 8 files of at most 16 MiB: summarize.py keeps to that).
#
# It always reports within its budget: one deadline (CHECK_SH_DEADLINE_S, default 540 s, under
# the device call's 600 s) clamps every step's own limit (its expected time with a margin) to what
# is left, a step that no longer fits is not started, a step that fails or hangs is recorded and
# the next one starts, summary.json is rewritten after every step, and a TERM or INT (the device
# call's own limit) or any other exit writes it once more, naming the steps that did not finish.
# A build that fails with cuDNN is configured and built again without it, and the summary says so.
#
# Usage: bash tests/device/check.sh [OUTDIR]      (OUTDIR default: $OUT, else ./device-check-out)
# Environment:
#   CHECK_SH_CPU_ONLY=1   dry run on a machine without a GPU: the same build from the carried
#                         dependencies with the CUDA backend off (cuDNN's host part still on),
#                         the unit tests instead of the GPU tests, the runs on the cpu backend
#                         with the tiny preset, no nccl or fp8 steps
#   CHECK_SH_PREBUILT=DIR use the build folder DIR (its moebench and test binaries, the system's
#                         mpirun) instead of unpacking, configuring and building: the check's
#                         orchestration alone, as tests/device/test_check_dry_run.py runs it
#   CHECK_SH_DEADLINE_S   seconds the whole check may take (default 540)
#   CHECK_SH_LIMITS       STEP=SECONDS,... overrides of steps' own limits
#   CHECK_SH_FORCE        hang:STEP,fail:STEP,lonelycudnn:STEP,... a testing aid: the step's
#                         command is replaced by one that never ends, or one that fails at
#                         once, or run with cuDNN's folder off the loader's path
#   CHECK_SH_JOBS=N       build jobs (default: all cores)
#   CHECK_SH_WORK=DIR     build and unpack folder (default /tmp/moebench-device-check)
#   CHECK_SH_BENCH_ARGS   extra flags for `moebench bench`
#   CHECK_SH_KEEP_BUILD=1 reuse the build folder of an earlier run
#   CHECK_SH_CMAKE_ARGS   extra CMake flags (they come last, so they override)
# Exit status: 0 when every step passed, 1 otherwise (the summary says which failed or did not
# finish); 143 after a TERM, 130 after an INT, the summary written first.
set -uo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="${1:-${OUT:-$PWD/device-check-out}}"
work="${CHECK_SH_WORK:-/tmp/moebench-device-check}"
cpu_only="${CHECK_SH_CPU_ONLY:-0}"
prebuilt="${CHECK_SH_PREBUILT:-}"
# shellcheck disable=SC2034  # check_build.sh's
jobs="${CHECK_SH_JOBS:-$(nproc)}"
carried="$repo/tests/device/.cache/carry/deps.tar.gz"
deadline_s="${CHECK_SH_DEADLINE_S:-540}"
force=",${CHECK_SH_FORCE:-},"
limits=",${CHECK_SH_LIMITS:-},"
# The output and work folders must be folders this check can make or use: anything else is refused
# in one line before a file is touched (a regular file given as $OUT once made `out` empty and the
# cleanup below remove files at /).
refuse() {  # refuse MESSAGE: one line, exit 2, nothing touched
  echo "check.sh: $1" >&2
  exit 2
}
for what in out work; do
  dir="${!what}"
  [ -n "$dir" ] || refuse "the $what folder is empty; give a folder"
  [ -e "$dir" ] && [ ! -d "$dir" ] && refuse "$dir ($what) exists and is not a folder; give a folder"
  mkdir -p "$dir" 2>/dev/null || refuse "cannot create the $what folder $dir"
  abs="$(cd "$dir" 2>/dev/null && pwd)" || refuse "cannot enter the $what folder $dir"
  [ "$abs" != / ] || refuse "the $what folder is /; give a folder of its own"
  printf -v "$what" '%s' "$abs"
done
# Numbers from the environment: whole seconds only, or the check refuses with a summary saying why
# (arithmetic on "abc" or "1e3" once skipped the deadline, and "plan=5m" broke every summary).
bad_input=""
case "$deadline_s" in
'' | *[!0-9]*) bad_input="CHECK_SH_DEADLINE_S=$deadline_s is not a whole number of seconds" ;;
*) [ "$deadline_s" -ge 30 ] && [ "$deadline_s" -le 86400 ] ||
  bad_input="CHECK_SH_DEADLINE_S=$deadline_s: give 30 to 86400 seconds" ;;
esac
for item in ${CHECK_SH_LIMITS:+${CHECK_SH_LIMITS//,/ }}; do
  name="${item%%=*}" value="${item#*=}"
  if [ "$item" = "$name" ] || [ -z "$name" ]; then
    bad_input="CHECK_SH_LIMITS: '$item' is not STEP=SECONDS"
    break
  fi
  case "$value" in
  '' | *[!0-9]*)
    bad_input="CHECK_SH_LIMITS: $name=$value is not a whole number of seconds"
    break
    ;;
  esac
  if [ "$value" -lt 1 ]; then
    bad_input="CHECK_SH_LIMITS: $name=$value: a step needs at least 1 s"
    break
  fi
done
[ -n "$bad_input" ] && deadline_s=540 limits=",,"  # what the summary's own arithmetic needs
results="$work/results"  # the reports, archived into $out/results.tar.gz by summarize.py
build="$work/build"
log="$out/check.log"
steps="$work/steps.tsv"
rm -rf "$results" "$work/versions.json"
rm -f "$out/summary.json" "$out/results.tar.gz" "$out"/.*.tmp
mkdir -p "$results"
: >"$log"
: >"$steps"
t0=$(date +%s)
deadline=$((t0 + deadline_s))
# What summary.json needs after the last step (summarize.py's own run), kept out of every step.
reserve_s=15
cudnn_state="$work/cudnn.txt"  # "on", or "off: why" (summarize.py reads it)
echo "on" >"$cudnn_state"

# Every step this run means to take, in order: the ones it never records are named unfinished.
if [ -n "$prebuilt" ]; then
  planned="plan,cudnn_graphs"
else
  planned="unpack,configure,build,provenance,plan,cudnn_graphs"
fi
gpu_planned="plan,cudnn_graphs,run_1gpu,bench,gpu_tests,run_1gpu_fp8_blockwise,run_1gpu_fp8"
gpu_planned+=",bench_fp8,run_4rank,gpu_comm_tests,run_1gpu_nccl,run_4rank_pp"
if [ "$cpu_only" = 1 ]; then
  planned+=",run_1gpu,bench,unit_tests,run_4rank,run_4rank_pp"
else
  planned+="${gpu_planned#plan,cudnn_graphs}"
fi
# Each step's own limit in seconds: its expected time on the H200 with a margin
# (tests/device/README.md, "The steps"); CHECK_SH_LIMITS overrides, the deadline clamps.
declare -A limit_of=(
  [unpack]=60 [configure]=120 [build]=360 [provenance]=30 [plan]=30 [cudnn_graphs]=60
  [run_1gpu]=90 [bench]=150 [gpu_tests]=150 [unit_tests]=150 [run_1gpu_fp8_blockwise]=60
  [run_1gpu_fp8]=60 [bench_fp8]=120 [run_4rank]=90 [gpu_comm_tests]=90 [run_1gpu_nccl]=60
  [run_4rank_pp]=120
)
# 16 cores build in 2-3 minutes; a dry run on 2 cores takes about 4.
[ "$cpu_only" = 1 ] && limit_of[build]=600
bench_full_s=200  # the probe runs at its full size when this much of the deadline remains
stopped=""   # why the check ended early: "deadline", "SIGTERM", "SIGINT"
step_pid=""  # the running step, for the signal handler
finished=0

say() { echo "# check.sh [$(($(date +%s) - t0))s] $*" | tee -a "$log"; }
left_s() { echo $((deadline - $(date +%s) - reserve_s)); }

# summary.json (and results.tar.gz) from what has finished so far; FINAL=1 for the last one.
write_summary() {
  local final="$1"
  python3 "$repo/tests/device/summarize.py" --out "$out" --steps "$steps" --work "$work" \
    --results "$results" --carried "$carried" --cpu-only "$cpu_only" --prebuilt "$prebuilt" \
    --wall-s "$(($(date +%s) - t0))" --build "$build" --planned "$planned" \
    --deadline-s "$deadline_s" --stopped "$stopped" --final "$final" --cudnn "$cudnn_state"
}

# step NAME LIMIT_S COMMAND...: runs it with its output in check.log, records status and time.
# Its limit (CHECK_SH_LIMITS may override it) is clamped to what the deadline leaves; one that
# no longer fits is not started.
step() {
  local name="$1" limit="$2"
  shift 2
  local override="${limits#*,"$name"=}"
  [ "$override" != "$limits" ] && limit="${override%%,*}"
  local left
  left=$(left_s)
  if [ "$left" -lt 5 ]; then
    stopped=deadline
    say "step $name: not started, the ${deadline_s} s deadline leaves ${left} s"
    return 124
  fi
  [ "$left" -lt "$limit" ] && limit="$left"
  # The testing aid: the same step machinery around a command that hangs or fails.
  case "$force" in
  *",hang:$name,"*) set -- sleep 100000 ;;
  *",fail:$name,"*) set -- bash -c 'echo "forced to fail (CHECK_SH_FORCE)"; exit 3' ;;
  *",lonelycudnn:$name,"*)
    # cuDNN's folder off the loader's path, as from a wheel without RUNPATH: libcudnn.so.9 alone
    # in a folder of its own, the loader's cache off; the step's binary then finds its own
    # libraries only through its RUNPATH, and cuDNN's engines not at all.
    local lonely="$work/lonely-cudnn" cudnn_lib
    cudnn_lib="$(sed -n 's/^CUDNN_LIBRARY:FILEPATH=//p' "$build/CMakeCache.txt")"
    mkdir -p "$lonely" && cp "$(readlink -f "$cudnn_lib")" "$lonely/libcudnn.so.9"
    set -- /lib64/ld-linux-x86-64.so.2 --inhibit-cache --library-path "$lonely" "$@"
    ;;
  esac
  say "step $name (limit ${limit} s): $*"
  local start rc
  start=$(date +%s)
  # In the background, so that a TERM reaches the handler at once (bash defers traps while a
  # foreground child runs).
  timeout --kill-after=10 "$limit" "$@" >>"$log" 2>&1 &
  step_pid=$!
  wait "$step_pid"
  rc=$?
  step_pid=""
  local status=passed
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    status=timeout
    [ $(($(date +%s) + reserve_s + 5)) -ge "$deadline" ] && stopped=deadline
  elif [ "$rc" != 0 ]; then
    status=failed
  fi
  printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$status" "$rc" "$(($(date +%s) - start))" "$limit" \
    >>"$steps"
  say "step $name: $status (exit $rc, $(($(date +%s) - start)) s)"
  write_summary 0 >>"$log" 2>&1
  return "$rc"
}
skip() {  # skip NAME REASON
  printf '%s\tskipped\t\t0\t\t%s\n' "$1" "$2" >>"$steps"
  say "step $1: skipped ($2)"
}
finish() {
  finished=1
  say "writing $out/summary.json"
  write_summary 1 | tee -a "$log"
  exit "${PIPESTATUS[0]}"
}
on_signal() {  # on_signal NAME STATUS: end the running step, write the summary, exit
  stopped="$1"
  trap - TERM INT
  if [ -n "$step_pid" ]; then
    kill -TERM "$step_pid" 2>/dev/null
    wait "$step_pid" 2>/dev/null
  fi
  finished=1
  say "$1: writing $out/summary.json with the steps that finished"
  write_summary 1 | tee -a "$log"
  exit "$2"
}
trap 'on_signal SIGTERM 143' TERM
trap 'on_signal SIGINT 130' INT
# Any other way out (a bug here, set -u) still leaves a summary.
trap '[ "$finished" = 1 ] || { stopped="${stopped:-exit}"; write_summary 1 >>"$log" 2>&1; }' EXIT
if [ -n "$bad_input" ]; then
  say "refused: $bad_input"
  stopped="bad input: $bad_input"
  finished=1
  write_summary 1 >>"$log" 2>&1
  echo "check.sh: $bad_input" >&2
  exit 2
fi

# The schedule, in the log before anything runs: each step's own limit, and where the deadline
# would leave it if every earlier step took its whole limit.
schedule() {  # schedule TITLE STEPS: each step's limit, clamped as the deadline would
  local at=$(($(date +%s) - t0)) name limit
  say "$1 (deadline ${deadline_s} s, ${reserve_s} s kept for the summary):"
  for name in ${2//,/ }; do
    limit="${limit_of[$name]:-60}"
    local override="${limits#*,"$name"=}"
    [ "$override" != "$limits" ] && limit="${override%%,*}"
    local room=$((deadline_s - reserve_s - at))
    [ "$room" -lt 0 ] && room=0
    [ "$limit" -gt "$room" ] 2>/dev/null && limit="$room"
    say "  $name: limit ${limit} s, from ${at} s"
    at=$((at + limit))
  done
}
if [ "$cpu_only" = 1 ]; then
  # What the same check runs on the GPU machine, after its build, in this order.
  schedule "schedule on the GPU machine, after the build" "$gpu_planned"
  schedule "schedule of this dry run" "$planned"
else
  schedule "schedule" "$planned"
fi
# --- the build: carried dependencies, configure, build (or a prebuilt folder) -----------------
if [ -n "$prebuilt" ]; then
  build="$(cd "$prebuilt" && pwd)"
  echo "off: a prebuilt build folder ($build)" >"$cudnn_state"
  [ -x "$build/tests/cudnn_attention_tests" ] && echo "on" >"$cudnn_state"
  say "prebuilt build folder $build: no unpack, configure or build; the system's mpirun"
  mpirun_cmd=(mpirun --oversubscribe)
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
else
  # shellcheck source=tests/device/check_build.sh
  source "$repo/tests/device/check_build.sh"
fi
bin="$build/moebench"
# The wheels' cuDNN and NVRTC library folders on the loader's path: cuDNN loads its graph and
# engine libraries, and NVRTC its builtins, by name at run time, and a wheel's libcudnn.so.9 has
# no RUNPATH to find them by (PyTorch's own builds hit "Unable to load any of
# {libcudnn_graph.so.9 ...}"). Only those two: the toolkit's cuBLAS and runtime stay the ones the
# build linked. The summary records the folders and which libraries the runs loaded.
wheel_libs="$(python3 -c 'import glob, os, nvidia
print(":".join(sorted(d for p in nvidia.__path__ for n in ("cudnn", "cuda_nvrtc")
                      for d in glob.glob(os.path.join(p, n, "lib")))))' 2>/dev/null)"
[ -n "$wheel_libs" ] && export LD_LIBRARY_PATH="$wheel_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
echo "$wheel_libs" >"$work/loader_path.txt"
say "loader path for cuDNN and NVRTC: ${wheel_libs:-none (no nvidia wheels)}"

# The GPU's SM ("9.0" -> 90), for the checks that should judge only the architecture in hand.
gpu_sm=""
if [ "$cpu_only" != 1 ]; then
  gpu_sm="$(timeout 20 nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null |
    head -n 1 | tr -d ' .')"
fi

# --- what the runs run ------------------------------------------------------------------------
common=(--warmup 1 --steps 3 --verify)
device_model=(--model-config "$repo/tests/device/deepseek-v3-device.json" --seq-len 512)
# One GPU: the embedding, a dense layer, a MoE layer, the head and the loss (about 34 GiB with
# AdamW, as much again for the --verify reference); 4 ranks sharing it: one MoE layer without the
# ends, 4 experts a rank; the pipeline: 4 MoE layers over 2 stages of 2 chunks, no optimizer
# state (about 53 GiB for the four ranks and the reference together).
run_1=("${device_model[@]}" --layers 2 --dense-layers 1)
run_4=("${device_model[@]}" --layers 1 --dense-layers 0 --head off --ep 4)
run_pp=("${device_model[@]}" --layers 4 --dense-layers 0 --head off --pp 2 --vp 2 --ep 2
  --global-batch 8 --optimizer none)
# `moebench plan` for the GPU runs' exact flags (the model file, layouts, memory) in every mode,
# so that a dry run here catches what would fail them there.
plan_line() { printf '%q ' "$bin" plan --backend cuda --verify "$@" && echo; }
{
  echo "set -e"
  plan_line "${run_1[@]}"
  plan_line --world 4 "${run_4[@]}"
  plan_line --world 4 "${run_pp[@]}"
} >"$work/plan.sh"
if [ "$cpu_only" = 1 ]; then
  backend=cpu
  tiny=(--preset deepseek-v3-tiny)
  run_1=("${tiny[@]}")
  run_4=("${tiny[@]}" --ep 4)
  # The GPU pipeline run's own flags, the tiny model's layers in place of the check model's.
  run_pp=("${tiny[@]}" --seq-len 512 --layers 4 --dense-layers 0 --head off --pp 2 --vp 2 --ep 2
    --global-batch 8 --optimizer none)
else
  backend=cuda
fi
run() {  # run NAME LIMIT RANKS FLAGS...: a --verify run of RANKS ranks, its report in results/
  local name="$1" limit="$2" ranks="$3"
  shift 3
  step "$name" "$limit" env CUDA_VISIBLE_DEVICES="${CUDA_VISIBLE_DEVICES:-0}" \
    "${mpirun_cmd[@]}" -np "$ranks" "$bin" run "${common[@]}" --backend "$backend" "$@" \
    --out "$results/${name//_/-}.json"
}
# The probe, sized to the time left: full (1 and 4 layers, 10 iterations) when `full_s` remain,
# unless CHECK_SH_BENCH_ARGS sizes it.
bench() {  # bench NAME LIMIT FULL_S FLAGS...
  local name="$1" limit="$2" full_s="$3"
  shift 3
  local size=()
  if [ -z "${CHECK_SH_BENCH_ARGS:-}" ] && [ "$(left_s)" -lt "$full_s" ]; then
    size=(--layers 1 --iterations 3 --warmup 1)
    say "$name: under $full_s s left, the probe runs one layer and 3 iterations"
  fi
  # shellcheck disable=SC2086  # CHECK_SH_BENCH_ARGS is a list of flags
  step "$name" "$limit" "$bin" bench --backend "$backend" "$@" --out "$results/${name//_/-}.json" \
    "${size[@]}" ${CHECK_SH_BENCH_ARGS:-}
}

# --- the steps, the most valuable first ---------------------------------------------------------
[ "$cpu_only" = 1 ] || timeout 20 nvidia-smi >>"$log" 2>&1
step plan "${limit_of[plan]}" bash "$work/plan.sh"
if [ -x "$build/tests/cudnn_attention_tests" ]; then
  # Validated for this GPU's SM only (MOEBENCH_TEST_SM); without a GPU, for sm 90 and sm 100.
  export MOEBENCH_TEST_SM="$gpu_sm"
  step cudnn_graphs "${limit_of[cudnn_graphs]}" "$build/tests/cudnn_attention_tests" --no-intro=true
else
  skip cudnn_graphs "built without cuDNN ($(cat "$cudnn_state"))"
fi
run run_1gpu "${limit_of[run_1gpu]}" 1 "${run_1[@]}"
bench bench "${limit_of[bench]}" "$bench_full_s"
if [ "$cpu_only" = 1 ]; then
  step unit_tests "${limit_of[unit_tests]}" "$build/tests/moebench_tests" --no-intro=true
  run run_4rank "${limit_of[run_4rank]}" 4 --comm mpi "${run_4[@]}"
else
  # The cuda backend against the cpu backend (tests/gpu/cuda_compute_test.cpp), directly.
  step gpu_tests "${limit_of[gpu_tests]}" "$build/tests/gpu/moebench_gpu_tests" --no-intro=true
  # DeepSeek-V3's blockwise FP8 (cuBLASLt's 1x128 / 128x128 block scaling: Hopper only), then
  # per-tensor scaling, then the probe with the linear layers' GEMMs in FP8.
  run run_1gpu_fp8_blockwise "${limit_of[run_1gpu_fp8_blockwise]}" 1 "${run_1[@]}" \
    --precision fp8 --fp8-recipe blockwise
  run run_1gpu_fp8 "${limit_of[run_1gpu_fp8]}" 1 "${run_1[@]}" --precision fp8
  bench bench_fp8 "${limit_of[bench_fp8]}" "$bench_full_s" --precision fp8
  run run_4rank "${limit_of[run_4rank]}" 4 --comm mpi "${run_4[@]}"
  # The communicator tests on device memory, as ctest registered them (third_party/nccl.cmake);
  # each test's own TIMEOUT (tests/gpu/CMakeLists.txt) is below this step's limit.
  if [ -x "$build/tests/gpu/nccl_communicator_test" ] &&
    ctest --test-dir "$build" -N -R '^gpu[.]communicator[.]' | grep -q 'Total Tests: [1-9]'; then
    step gpu_comm_tests "${limit_of[gpu_comm_tests]}" ctest --test-dir "$build" \
      -R '^gpu[.]communicator[.]' --output-on-failure
  else
    skip gpu_comm_tests "nccl backend not built or its GPU tests not registered"
  fi
  if grep -q '^NCCL_LIBRARY:.*nccl' "$build/CMakeCache.txt" 2>/dev/null; then
    run run_1gpu_nccl "${limit_of[run_1gpu_nccl]}" 1 "${run_1[@]}" --comm nccl
  else
    skip run_1gpu_nccl "nccl backend not built"
  fi
fi
run run_4rank_pp "${limit_of[run_4rank_pp]}" 4 --comm mpi "${run_pp[@]}"
finish
