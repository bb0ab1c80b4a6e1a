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
# Exit status: 0 when every step passed, 1 otherwise (the summary says which failed).
set -uo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="${1:-${OUT:-$PWD/device-check-out}}"
work="${CHECK_SH_WORK:-/tmp/moebench-device-check}"
cpu_only="${CHECK_SH_CPU_ONLY:-0}"
jobs="${CHECK_SH_JOBS:-$(nproc)}"
carried="$repo/tests/device/.cache/carry/deps.tar.gz"
mkdir -p "$out" "$work"
out="$(cd "$out" && pwd)"
log="$out/check.log"
steps="$work/steps.tsv"
: >"$log"
: >"$steps"
t0=$(date +%s)

say() { echo "# check.sh [$(($(date +%s) - t0))s] $*" | tee -a "$log"; }

# step NAME TIMEOUT_S COMMAND...: runs it with its output in check.log, records status and time.
step() {
  local name="$1" limit="$2"
  shift 2
  say "step $name: $*"
  local start=$(date +%s) rc
  timeout --kill-after=15 "$limit" "$@" >>"$log" 2>&1
  rc=$?
  local status=passed
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    status=timeout
  elif [ "$rc" != 0 ]; then
    status=failed
  fi
  printf '%s\t%s\t%s\t%s\n' "$name" "$status" "$rc" "$(($(date +%s) - start))" >>"$steps"
  say "step $name: $status (exit $rc, $(($(date +%s) - start)) s)"
  return "$rc"
}
skip() {  # skip NAME REASON
  printf '%s\tskipped\t\t0\t%s\n' "$1" "$2" >>"$steps"
  say "step $1: skipped ($2)"
}
finish() {
  say "writing $out/summary.json"
  python3 "$repo/tests/device/summarize.py" --out "$out" --steps "$steps" --work "$work" \
    --carried "$carried" --cpu-only "$cpu_only" --wall-s "$(($(date +%s) - t0))" \
    --build "$work/build" | tee -a "$log"
  exit "${PIPESTATUS[0]}"
}

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
step run_4rank 300 env CUDA_VISIBLE_DEVICES="${CUDA_VISIBLE_DEVICES:-0}" "${mpirun_cmd[@]}" -np 4 \
  "$bin" run "${tiny[@]}" --backend "$backend" --comm mpi --ep 4 --out "$out/run-4rank.json"
step run_4rank_pp 300 env CUDA_VISIBLE_DEVICES="${CUDA_VISIBLE_DEVICES:-0}" "${mpirun_cmd[@]}" \
  -np 4 "$bin" run "${tiny[@]}" --backend "$backend" --comm mpi --pp 2 --vp 2 --ep 2 \
  --global-batch 8 --out "$out/run-4rank-pp.json"
# shellcheck disable=SC2086  # CHECK_SH_BENCH_ARGS is a list of flags
step bench 420 "$bin" bench --backend "$backend" --out "$out/bench.json" ${CHECK_SH_BENCH_ARGS:-}
# The same probe with the linear layers' GEMMs in FP8 (E4M3, per-tensor scales): the step
# against bench.json's BF16 one.
if [ "$cpu_only" = 1 ]; then
  skip bench_fp8 "fp8 on the device only"
else
  # shellcheck disable=SC2086
  step bench_fp8 300 "$bin" bench --backend cuda --precision fp8 --out "$out/bench-fp8.json" \
    ${CHECK_SH_BENCH_ARGS:-}
fi
finish
