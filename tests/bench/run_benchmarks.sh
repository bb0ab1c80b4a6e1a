#!/usr/bin/env bash
# Runs moebench_bench (tests/bench/README.md) at a few sizes and world sizes, ep = world, and
# prints each run's table. A benchmark, not a test: it exits non-zero only if a run errors.
#
#   tests/bench/run_benchmarks.sh [BUILD_DIR]          (default BUILD_DIR: build)
#   NPS="1 2 4" REPS=10 SIZES="512:256:1024" tests/bench/run_benchmarks.sh build
#
# SIZES is a list of hidden:moe_ffn:seq_len (the tiny preset's structure at that width).
set -euo pipefail

build=${1:-build}
bin=$build/tests/bench/moebench_bench
if [[ ! -x $bin ]]; then
  echo "run_benchmarks.sh: $bin not found; build it first: cmake --build $build --target moebench_bench" >&2
  exit 2
fi
nps=${NPS:-"1 2 4"}
reps=${REPS:-10}
sizes=${SIZES:-"256:128:1024 512:256:1024 1024:512:512"}
if [[ $EUID -eq 0 ]]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi

echo "# $(date -u +%FT%TZ) on $(hostname): $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
for size in $sizes; do
  IFS=: read -r hidden ffn seq <<<"$size"
  for np in $nps; do
    cmd=(mpirun -np "$np" --oversubscribe "$bin" --hidden "$hidden" --moe-ffn "$ffn"
         --seq-len "$seq" --ep "$np" --reps "$reps")
    echo
    echo "## ${cmd[*]}"
    if ((np > $(nproc))); then
      echo "# note: $np ranks on $(nproc) cores are oversubscribed (see README.md)"
    fi
    "${cmd[@]}"
  done
done
