#!/usr/bin/env bash
# Fuzzes moebench's input readers with libFuzzer (clang): the model config reader, the command
# line, and the run-report reader and merger (tests/fuzz/fuzz_*.cpp), each under ASan and UBSan.
#
#   tests/fuzz/run.sh [--seconds S] [--target config|cli|report]... [--merge]
#
# Builds build-fuzz/ (clang++, -DMOEBENCH_FUZZ=ON, no CUDA) when needed, then fuzzes each target
# for S seconds (default 60) from a working copy of its seed corpus (tests/fuzz/corpus/<target>,
# copied to build-fuzz/corpus/<target>). A crash stops that target and leaves its input in
# build-fuzz/artifacts/<target>/ (the script then exits 1); fix it and copy the input into
# tests/fuzz/corpus/<target>/, where ctest (fuzz.corpus.*) replays it in every build after.
# --merge adds the inputs that found new coverage to tests/fuzz/corpus (libFuzzer's -merge=1;
# config and cli only, inputs up to 2 KB and 512 bytes).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${FUZZ_BUILD_DIR:-$repo/build-fuzz}"
seconds=60
merge=0
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --target) targets+=("$2"); shift 2 ;;
    --merge) merge=1; shift ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=(config cli report)
command -v clang++ >/dev/null || { echo "run.sh: clang++ not found (apt-get install clang)" >&2; exit 2; }

if [ ! -f "$build/build.ninja" ]; then
  CC=clang CXX=clang++ cmake -S "$repo" -B "$build" -G Ninja -DMOEBENCH_FUZZ=ON \
    -DMOEBENCH_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
ninja -C "$build" $(printf 'fuzz_%s ' "${targets[@]}") >/dev/null

status=0
for t in "${targets[@]}"; do
  work="$build/corpus/$t"
  artifacts="$build/artifacts/$t"
  mkdir -p "$work" "$artifacts"
  cp -n "$repo/tests/fuzz/corpus/$t/"* "$work/" 2>/dev/null || true
  log="$build/fuzz-$t.log"
  echo "== fuzz_$t: ${seconds} s from $(ls "$work" | wc -l) inputs (log: $log)"
  if "$build/tests/fuzz/fuzz_$t" "$work" -dict="$repo/tests/fuzz/moebench.dict" \
      -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=4096 \
      -artifact_prefix="$artifacts/" -print_final_stats=1 >"$log" 2>&1; then
    grep -E "^stat::(number_of_executed_units|peak_rss_mb|new_units_added)" "$log" | tr '\n' ' '
    echo
    # What is committed stays small: inputs up to 2 KB (configs) or 512 bytes (command lines);
    # run reports are 15 KB each, so the report target's grown corpus stays in build-fuzz.
    case "$t" in config) keep=2048 ;; cli) keep=512 ;; *) keep=0 ;; esac
    if [ "$merge" -eq 1 ] && [ "$keep" -gt 0 ]; then
      "$build/tests/fuzz/fuzz_$t" -merge=1 -max_len="$keep" "$repo/tests/fuzz/corpus/$t" \
        "$work" >>"$log" 2>&1
      echo "   merged: $(ls "$repo/tests/fuzz/corpus/$t" | wc -l) inputs in tests/fuzz/corpus/$t"
    fi
  else
    status=1
    echo "   CRASH: $(grep -m1 -E "ERROR|==ERROR|runtime error|uncaught|deadly" "$log" || true)"
    echo "   input: $(ls -t "$artifacts" | head -1) in $artifacts (full output: $log)"
  fi
done
exit $status
