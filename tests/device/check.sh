#!/usr/bin/env bash
# The device check: on a machine with one GPU and nothing installed beyond the CUDA toolkit,
# CMake, ninja and Python, build moebench with the dependencies tests/device/prepare.sh packed
# (tests/device/.cache/carry/deps.tar.gz), then
#   1. the GPU tests (moebench_gpu_tests: the cuda backend against the cpu backend; then ctest's
#      gpu.communicator.* tests when the nccl backend is built),
#   2. a --verify step of the tiny preset on one GPU (and with --comm nccl when built),
#   3. a --verify step with --precision fp8 on one GPU,
#   4. a 4-rank --verify run sharing that GPU (--comm mpi --backend cuda --ep 4), and a 4-rank
#      pipelined one (--pp 2 --vp 2 --ep 2, 4 micro-batches a rank: the interleaved schedule, its
#      point-to-point exchanges and gradient accumulation on the device),
#   5. the performance probe (moebench bench --backend cuda), in BF16 and in FP8,
# and write ONE JSON summary, summary.json, into the output folder with the figures and versions
# (tests/device/summarize.py; tests/device/README.md says how to read it).
#
# It always reports within its budget: one overall deadline (CHECK_SH_DEADLINE_S, default 480 s,
# under the device call's 600 s) clamps every step's own limit to the time left, a step that no
# longer fits is not started, summary.json is rewritten after every step, and a TERM or INT (the
# device call's own limit) or any exit writes it once more, naming the steps that did not finish.
#
# Usage: bash tests/device/check.sh [OUTDIR]      (OUTDIR default: $OUT, else ./device-check-out)
# Environment:
#   CHECK_SH_CPU_ONLY=1   dry run on a machine without a GPU: the same build from the carried
#                         dependencies with the CUDA backend off, the unit tests instead of the
#                         GPU tests, and steps 2-4 on the cpu backend
#   CHECK_SH_JOBS=N       build jobs (default: all cores)
#   CHECK_SH_WORK=DIR     build and unpack folder (default /tmp/moebench-device-check)
#   CHECK_SH_BENCH_ARGS   extra flags for `moebench bench`
#   CHECK_SH_KEEP_BUILD=1 reuse the build folder of an earlier run
#   CHECK_SH_CMAKE_ARGS   extra CMake flags (they come last, so they override)
#   CHECK_SH_DEADLINE_S   seconds the whole check may take (default 480)
# Exit status: 0 when every step passed, 1 otherwise (the summary says which failed or did not
# finish); 143 after a TERM, 130 after an INT, the summary written first.
set -uo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="${1:-${OUT:-$PWD/device-check-out}}"
work="${CHECK_SH_WORK:-/tmp/moebench-device-check}"
cpu_only="${CHECK_SH_CPU_ONLY:-0}"
jobs="${CHECK_SH_JOBS:-$(nproc)}"
carried="$repo/tests/device/.cache/carry/deps.tar.gz"
deadline_s="${CHECK_SH_DEADLINE_S:-480}"
mkdir -p "$out" "$work"
out="$(cd "$out" && pwd)"
log="$out/check.log"
steps="$work/steps.tsv"
: >"$log"
: >"$steps"
t0=$(date +%s)
deadline=$((t0 + deadline_s))
# What summary.json needs after the last step (summarize.py's own run), kept out of every step.
reserve_s=15
# Every step this run means to take, in order: the ones it never records are named unfinished.
if [ "$cpu_only" = 1 ]; then
  planned="unpack,configure,build,provenance,unit_tests,run_1gpu,run_1gpu_nccl,run_1gpu_fp8"
  planned+=",run_1gpu_fp8_blockwise"
else
  planned="unpack,configure,build,provenance,gpu_tests,gpu_comm_tests,run_1gpu,run_1gpu_nccl"
  planned+=",run_1gpu_fp8,run_1gpu_fp8_blockwise"
fi
planned+=",run_4rank,run_4rank_pp,bench,bench_fp8"
stopped=""   # why the check ended early: "deadline", "SIGTERM", "SIGINT"
step_pid=""  # the running step, for the signal handler
finished=0

say() { echo "# check.sh [$(($(date +%s) - t0))s] $*" | tee -a "$log"; }

# summary.json from what has finished so far; FINAL=1 for the last one (quiet otherwise).
write_summary() {
  local final="$1"
  python3 "$repo/tests/device/summarize.py" --out "$out" --steps "$steps" --work "$work" \
    --carried "$carried" --cpu-only "$cpu_only" --wall-s "$(($(date +%s) - t0))" \
    --build "$work/build" --planned "$planned" --deadline-s "$deadline_s" \
    --stopped "$stopped" --final "$final"
}

# step NAME TIMEOUT_S COMMAND...: runs it with its output in check.log, records status and time.
# Its limit is clamped to what the deadline leaves; one that no longer fits is not started.
step() {
  local name="$1" limit="$2"
  shift 2
  local left=$((deadline - $(date +%s) - reserve_s))
  if [ "$left" -lt 5 ]; then
    stopped=deadline
    say "step $name: not started, the ${deadline_s} s deadline leaves ${left} s"
    return 124
  fi
  [ "$left" -lt "$limit" ] && limit="$left"
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
  printf '%s\t%s\t%s\t%s\n' "$name" "$status" "$rc" "$(($(date +%s) - start))" >>"$steps"
  say "step $name: $status (exit $rc, $(($(date +%s) - start)) s)"
  write_summary 0 >>"$log" 2>&1
  return "$rc"
}
skip() {  # skip NAME REASON
  printf '%s\tskipped\t\t0\t%s\n' "$1" "$2" >>"$steps"
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

# --- the carried dependencies -----------------------------------------------------------------
if [ ! -f "$carried" ]; then
  say "no $carried: run tests/device/prepare.sh here first and carry tests/device/.cache/carry"
  skip unpack "missing deps.tar.gz"
  finish
fi
rm -rf "$work/deps"
step unpack 120 tar -xzf "$carried" -C "$work" || finish
deps="$work/deps"
ompi="$deps/openmpi"
export PATH="$ompi/bin:$PATH"
# The carried Open MPI was built for another prefix: its wrappers and mpirun find their own
# through OPAL_PREFIX.
export OPAL_PREFIX="$ompi"
# Open MPI 5 as root, ranks sharing one machine's cores (oversubscribed where fewer), shared
# memory between them: no network transport (UCX, libfabric) to probe, and no cross-memory-attach
# single copy (ptrace-based), which a sandbox may refuse.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,sm OMPI_MCA_smsc=^cma
export PRTE_MCA_rmaps_default_mapping_policy=:oversubscribe
mpirun_cmd=("$ompi/bin/mpirun" --oversubscribe)

# --- configure and build ----------------------------------------------------------------------
cmake_args=(-S "$repo" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release
  -DMOEBENCH_DEPS_PREFIX="$deps" -DMOEBENCH_BLAS_LIBRARY="$deps/lib/libscipy_openblas.so"
  -DMPI_C_COMPILER="$ompi/bin/mpicc" -DMPI_CXX_COMPILER="$ompi/bin/mpicxx"
  -DMPIEXEC_EXECUTABLE="$ompi/bin/mpirun"
  -DOPENSSL_INCLUDE_DIR="$deps/include" -DOPENSSL_CRYPTO_LIBRARY="$deps/lib/libcrypto.so.3")
targets=(moebench)
if [ "$cpu_only" = 1 ]; then
  cmake_args+=(-DMOEBENCH_CUDA=OFF)
  targets+=(moebench_tests)
else
  if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
    export PATH="$PATH:/usr/local/cuda/bin"
  fi
  cmake_args+=(-DCMAKE_CUDA_ARCHITECTURES=90 -DMOEBENCH_GPU_TESTS=ON)
  # NCCL from PyTorch's wheel (nvidia-nccl-cu13) when the toolkit has none.
  nccl_root="$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null)"
  [ -n "$nccl_root" ] && cmake_args+=(-DNCCL_ROOT="$nccl_root")
  targets+=(moebench_gpu_tests)
fi
# shellcheck disable=SC2206  # CHECK_SH_CMAKE_ARGS is a list of -D flags
cmake_args+=(${CHECK_SH_CMAKE_ARGS:-})
# A fresh build folder each time, unless CHECK_SH_KEEP_BUILD=1 (reruns on the same machine).
[ "${CHECK_SH_KEEP_BUILD:-0}" = 1 ] || rm -rf "$work/build"
if ! step configure 300 cmake "${cmake_args[@]}"; then
  # Registering the GPU tests with ctest is the part most likely to break on a new machine (it
  # runs only where a GPU is seen); rather than lose the whole call, build without it, run the
  # test binaries directly, and let the summary say configure failed.
  [ "$cpu_only" = 1 ] && finish
  rm -rf "$work/build"
  step configure_without_ctest_gpu_tests 300 cmake "${cmake_args[@]}" -DMOEBENCH_GPU_TESTS=OFF ||
    finish
fi
if [ "$cpu_only" != 1 ] && grep -q '^NCCL_LIBRARY:.*nccl' "$work/build/CMakeCache.txt" 2>/dev/null &&
  grep -q 'nccl_communicator_test' "$work/build/build.ninja" 2>/dev/null; then
  have_nccl=1
  targets+=(nccl_communicator_test)
else
  have_nccl=0
fi
step build 420 cmake --build "$work/build" -j "$jobs" --target "${targets[@]}" || finish
bin="$work/build/moebench"
# Nothing from the system's MPI, BLAS or header-only packages may have slipped in.
step provenance 60 bash "$repo/tests/device/provenance.sh" "$work/build" "$deps"

# --- tests and runs ---------------------------------------------------------------------------
tiny=(--preset deepseek-v3-tiny --warmup 1 --steps 3 --verify)
if [ "$cpu_only" = 1 ]; then
  step unit_tests 600 "$work/build/tests/moebench_tests" --no-intro=true
  backend=cpu
else
  nvidia-smi >>"$log" 2>&1
  # The cuda backend against the cpu backend (tests/gpu/cuda_compute_test.cpp), directly; then
  # the communicator tests on device memory, as ctest registered them (third_party/nccl.cmake).
  step gpu_tests 420 "$work/build/moebench_gpu_tests" --no-intro=true
  if [ "$have_nccl" = 1 ] &&
    ctest --test-dir "$work/build" -N -R '^gpu[.]communicator[.]' | grep -q 'Total Tests: [1-9]'; then
    step gpu_comm_tests 300 ctest --test-dir "$work/build" -R '^gpu[.]communicator[.]' \
      --output-on-failure --timeout 240
  else
    skip gpu_comm_tests "nccl backend not built or its GPU tests not registered"
  fi
  backend=cuda
fi
step run_1gpu 180 "${mpirun_cmd[@]}" -np 1 "$bin" run "${tiny[@]}" --backend "$backend" \
  --out "$out/run-1gpu.json"
if [ "$have_nccl" = 1 ]; then
  step run_1gpu_nccl 180 "${mpirun_cmd[@]}" -np 1 "$bin" run "${tiny[@]}" --backend cuda \
    --comm nccl --out "$out/run-1gpu-nccl.json"
else
  skip run_1gpu_nccl "nccl backend not built"
fi
if [ "$cpu_only" = 1 ]; then
  skip run_1gpu_fp8 "fp8 on the device only (the cpu emulation is in the e2e tests)"
else
  step run_1gpu_fp8 180 "${mpirun_cmd[@]}" -np 1 "$bin" run "${tiny[@]}" --backend cuda \
    --precision fp8 --out "$out/run-1gpu-fp8.json"
fi
# DeepSeek-V3's blockwise FP8 (cuBLASLt's 1x128 / 128x128 block scaling: Hopper only).
if [ "$cpu_only" = 1 ]; then
  skip run_1gpu_fp8_blockwise "fp8 on the device only"
else
  step run_1gpu_fp8_blockwise 180 "${mpirun_cmd[@]}" -np 1 "$bin" run "${tiny[@]}" --backend cuda \
    --precision fp8 --fp8-recipe blockwise --out "$out/run-1gpu-fp8-blockwise.json"
fi
step run_4rank 300 env CUDA_VISIBLE_DEVICES="${CUDA_VISIBLE_DEVICES:-0}" "${mpirun_cmd[@]}" -np 4 \
  "$bin" run "${tiny[@]}" --backend "$backend" --comm mpi --ep 4 --out "$out/run-4rank.json"
step run_4rank_pp 300 env CUDA_VISIBLE_DEVICES="${CUDA_VISIBLE_DEVICES:-0}" "${mpirun_cmd[@]}" \
  -np 4 "$bin" run "${tiny[@]}" --backend "$backend" --comm mpi --pp 2 --vp 2 --ep 2 \
  --global-batch 8 --out "$out/run-4rank-pp.json"
# The probe sized to the time left: the full one (1 and 4 layers, 10 iterations) when at least
# 240 s remain, else one layer and 3 iterations (the summary records what ran in bench.json).
bench_size=()
if [ $((deadline - $(date +%s) - reserve_s)) -lt 240 ]; then
  bench_size=(--layers 1 --iterations 3 --warmup 1)
  say "bench: under 240 s left, the probe runs one layer and 3 iterations"
fi
# shellcheck disable=SC2086  # CHECK_SH_BENCH_ARGS is a list of flags
step bench 420 "$bin" bench --backend "$backend" --out "$out/bench.json" "${bench_size[@]}" \
  ${CHECK_SH_BENCH_ARGS:-}
# The same probe with the linear layers' GEMMs in FP8 (E4M3, per-tensor scales): the step
# against bench.json's BF16 one.
if [ "$cpu_only" = 1 ]; then
  skip bench_fp8 "fp8 on the device only"
else
  # shellcheck disable=SC2086
  step bench_fp8 300 "$bin" bench --backend cuda --precision fp8 --out "$out/bench-fp8.json" \
    "${bench_size[@]}" ${CHECK_SH_BENCH_ARGS:-}
fi
finish
