#!/usr/bin/env python3
"""Benchmark: `moebench report` merging 1,000 run reports (the issue asks for under a second).

The reports are synthetic copies of one real run report (tests/e2e/report_fixtures.py): 10 GPU
counts (2 ... 1,024) with 100 repeats each, every report with one per-rank entry per GPU as a real
run of that size writes (--per-rank-cap limits that). The command is timed end to end (process
start, reading, hashing, schema validation, merging, writing JSON and Markdown), --repeat times;
the median and the range are printed with the timer's resolution.

    python3 tests/bench/bench_report_merge.py --binary build/moebench [--real r.json]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
import report_fixtures  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--binary", required=True)
    p.add_argument("--real", help="real run report to copy (default: run one at 2 ranks)")
    p.add_argument("--reports", type=int, default=1000)
    p.add_argument("--sizes", type=int, default=10, help="GPU counts 2, 4, ... 2^sizes")
    p.add_argument("--per-rank-cap", type=int, default=None,
                   help="at most this many per-rank entries per report (default: one per GPU)")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--limit-s", type=float, default=None, help="exit 1 when the median exceeds this")
    a = p.parse_args()

    work = tempfile.mkdtemp(prefix="moebench-bench-report-")
    if a.real:
        with open(a.real) as f:
            real = json.load(f)
    else:
        real = report_fixtures.real_run(os.path.abspath(a.binary), os.path.join(work, "real.json"))
    runs = os.path.join(work, "runs")
    os.makedirs(runs)
    sizes = [2 ** (k + 1) for k in range(a.sizes)]
    total_bytes = 0
    base_tflops = 0.02
    for i in range(a.reports):
        gpus = sizes[i % len(sizes)]
        # a little noise between repeats, a slow decline with size
        tflops = base_tflops * (1 - 0.01 * sizes.index(gpus)) * (1 + 0.002 * ((i * 7919) % 11 - 5))
        doc = report_fixtures.synthetic_run(real, gpus, tflops, 0.1, ranks_per_node=8,
                                            ep=min(gpus, 2), job_id=i, per_rank=a.per_rank_cap)
        path = report_fixtures.write(doc, os.path.join(runs, "run-%04d.json" % i))
        total_bytes += os.path.getsize(path)

    cmd = [os.path.abspath(a.binary), "report", runs, "--allow-mixed", "ep", "--quiet",
           "--out", os.path.join(work, "scaling.json"), "--markdown", os.path.join(work, "s.md")]
    times, cpu = [], []
    for _ in range(a.repeat):
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        times.append(time.perf_counter() - start)
        # CPU time says what the merge costs even on a machine busy with other work.
        cpu.append(usage.ru_utime + usage.ru_stime)
        rc = os.waitstatus_to_exitcode(status)
        if rc != 0:
            print("moebench report exited %d: %s" % (rc, " ".join(cmd)))
            return 1
    with open(os.path.join(work, "scaling.json")) as f:
        merged = json.load(f)
    assert len(merged["inputs"]) == a.reports, "not every report was merged"
    median = statistics.median(times)
    print("# moebench report over %d run reports (%d sizes x %d repeats), %.1f MB of JSON" %
          (a.reports, len(sizes), a.reports // len(sizes), total_bytes / 1e6))
    print("# per-rank entries per report: %s" % ("one per GPU (2..%d)" % sizes[-1]
                                                  if a.per_rank_cap is None
                                                  else "at most %d" % a.per_rank_cap))
    print("# wall time, end to end, %d runs: median %.3f s, min %.3f s, max %.3f s "
          "(time.perf_counter, resolution %.0e s)" % (a.repeat, median, min(times), max(times),
                                                      time.get_clock_info("perf_counter").resolution))
    print("# CPU time (user + sys, all threads): median %.3f s, min %.3f s, max %.3f s "
          "(getrusage, resolution 1e-06 s); %d CPUs, load average %.1f" %
          (statistics.median(cpu), min(cpu), max(cpu), os.cpu_count(), os.getloadavg()[0]))
    print("# inputs in %s" % runs)
    if a.limit_s is not None and median > a.limit_s:
        print("FAIL: median %.3f s > limit %.3f s" % (median, a.limit_s))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
