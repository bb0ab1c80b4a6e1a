#!/usr/bin/env bash
# Installs, builds and runs every test (unit, MPI, end-to-end). The README's test command and
# what CI runs.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${BUILD_DIR:-$repo/build}"
BUILD_DIR="$build" "$repo/harness/scripts/build.sh"
ctest --test-dir "$build" --output-on-failure --timeout 900
