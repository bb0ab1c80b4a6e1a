#!/usr/bin/env bash
# Installs what is missing (Debian/Ubuntu packages) and builds moebench into BUILD_DIR (default
# build/). Used by demo.sh and test.sh; safe to run again.
#   harness/scripts/build.sh            everything: the binary, the cuda plugin, every test
#   harness/scripts/build.sh TARGET...  only those targets (demo.sh: moebench, the CPU binary)
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${BUILD_DIR:-$repo/build}"
"$repo/third_party/install-deps.sh"
# cudnn-frontend's headers for the cuda backend's cuDNN attention, where nvcc is and the cuda
# plugin is built: best effort, the build goes on without them (attention then runs as batched
# GEMMs).
if [ $# -eq 0 ] || [[ " $* " == *" moebench_cuda "* ]]; then
  if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
    "$repo/third_party/fetch-cudnn-frontend.sh" "$build/_deps/cudnn-frontend" >/dev/null ||
      echo "build.sh: could not fetch cudnn-frontend; building without cuDNN attention" >&2
  fi
fi
cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" >/dev/null
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build "$build" -j "$(nproc)" "${targets[@]}"
