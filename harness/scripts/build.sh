#!/usr/bin/env bash
# Installs what is missing (Debian/Ubuntu packages) and builds moebench into BUILD_DIR (default
# build/). Used by demo.sh and test.sh; safe to run again.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${BUILD_DIR:-$repo/build}"
"$repo/third_party/install-deps.sh"
cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" >/dev/null
cmake --build "$build" -j "$(nproc)"
