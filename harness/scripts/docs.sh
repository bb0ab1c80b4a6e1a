#!/usr/bin/env bash
# Every console example of README.md and docs/*.md, produced anew by this build: builds the
# binary, runs each documented command on the cpu backend and rewrites its output block
# (harness/scripts/docs.py says how). Run it after a change that moves a printed line, and
# commit the result; e2e.test_readme fails until the docs match the build.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${BUILD_DIR:-$repo/build}"
BUILD_DIR="$build" "$repo/harness/scripts/build.sh" moebench
python3 "$repo/harness/scripts/docs.py" --binary "$build/moebench" --write "$@"
