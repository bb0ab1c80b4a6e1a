#!/usr/bin/env bash
# Installs what is missing (Debian/Ubuntu packages) and builds moebench into BUILD_DIR (default
# build/). Used by demo.sh and test.sh; safe to run again.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${BUILD_DIR:-$repo/build}"
"$repo/third_party/install-deps.sh"
# cudnn-frontend's headers for the cuda backend's cuDNN attention, where nvcc is: best effort, the
# build goes on without them (attention then runs as batched GEMMs).
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  "$repo/third_party/fetch-cudnn-frontend.sh" "$build/_deps/cudnn-frontend" >/dev/null ||
    echo "build.sh: could not fetch cudnn-frontend; building without cuDNN attention" >&2
fi
cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" >/dev/null
cmake --build "$build" -j "$(nproc)"
