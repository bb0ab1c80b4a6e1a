#!/usr/bin/env bash
# The CPU scaling demo: installs, builds, then runs the tiny preset at 1, 2 and 4 ranks with
# --verify, writing one run report per size into OUT_DIR (default demo/), then the scaling
# report of the three (JSON, Markdown and a PNG). It builds the binary alone (not the tests or the
# cuda plugin): about 3 minutes on 2 cores, the runs well under one.
set -euo pipefail
SECONDS=0
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${BUILD_DIR:-$repo/build}"
out="${OUT_DIR:-$repo/demo}"
BUILD_DIR="$build" "$repo/harness/scripts/build.sh" moebench
echo "== built in ${SECONDS} s =="
mkdir -p "$out"
if [ "$(id -u)" -eq 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
for np in 1 2 4; do
  echo "== $np rank(s) =="
  mpirun --oversubscribe -np "$np" "$build/moebench" run --preset deepseek-v3-tiny --ep "$np" \
    --verify --out "$out/run-np$np.json"
done
"$build/moebench" validate "$out"/run-np*.json
# The three sizes as one scaling report (EP grows with the ranks here, hence --allow-mixed ep).
"$build/moebench" report "$out"/run-np1.json "$out"/run-np2.json "$out"/run-np4.json \
  --allow-mixed ep --out "$out/scaling.json" --markdown "$out/scaling.md" --plot "$out/scaling.png"
echo "== demo done in ${SECONDS} s: $out =="
