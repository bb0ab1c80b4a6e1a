#!/usr/bin/env python3
"""Benchmark, not a test: `moebench predict --calibrate` on the cpu backend against measured runs.

Calibrates from one measured run of 4 ranks (the tiny preset's shapes with 4 layers, EP 2, one
micro-batch a rank, all-reduce) and predicts other runs of the same 4 ranks: more layers, a larger
global batch, pp 2 with vp 1 and 2, ZeRO-1 (reduce-scatter) against all-reduce. Each is run with
`--system cpu --calibrate` the first run's report, whose `expected` section holds the model's step
and phases for the pipeline rank that set the measured step time; they are printed beside what
that rank measured. On an oversubscribed host the ranks share cores: a rank waiting in MPI keeps
most of its share (Open MPI's yield_when_idle polls and yields, so the waiting process stays
runnable), and the time a rank spends descheduled counts in whichever phase it is in. Read the
ratios, not the absolute times. One run's ratio moves by tens of percent with the machine's
load, so every run is repeated (--repeat, default 3): the calibration
is the run with the median step of its repeats, and each line gives the median measured / expected
of its repeats, their range, and the phases of the median one.

    python3 tests/bench/predict_calibration.py --binary build/moebench [--steps 10] [--repeat 3]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

from tiny_model import write_tiny_model  # beside this script


def median_run(reports, key):
    """The report whose key(report) is the median of the list's (the lower one of an even count)."""
    ordered = sorted(reports, key=key)
    return ordered[(len(ordered) - 1) // 2]


def ratio(expected):
    """A report's expected section: its measured step over the model's."""
    return expected["measured_step_s"] / expected["expected_step_s"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    if args.repeat < 1 or args.steps < 1:
        ap.error("--steps and --repeat must be at least 1")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    with tempfile.TemporaryDirectory() as tmp:
        config = write_tiny_model(args.binary, tmp, num_hidden_layers=8)
        common = ["--model-config", config, "--seq-len", "128", "--ep", "2"]
        cases = [
            ("4 layers, gbs 4 (calibration)", ["--layers", "4"]),
            ("8 layers", ["--layers", "8"]),
            ("gbs 16 (4 micro-batches)", ["--layers", "4", "--global-batch", "16"]),
            ("pp 2, vp 1, gbs 8", ["--layers", "8", "--pp", "2", "--global-batch", "8"]),
            ("pp 2, vp 2, gbs 8", ["--layers", "8", "--pp", "2", "--vp", "2",
                                   "--global-batch", "8"]),
            ("ZeRO-1 (reduce-scatter)", ["--layers", "4", "--grad-reduce", "reduce-scatter"]),
        ]

        def run(name, flags):
            out = os.path.join(tmp, name + ".json")
            subprocess.run(["mpirun", "--oversubscribe", "-np", "4", args.binary, "run",
                            "--quiet", "--steps", str(args.steps), "--out", out] + common + flags,
                           check=True, env=env, capture_output=True)
            with open(out) as f:
                return out, json.load(f)

        # The calibration: the run of the first case's flags with the median step of its repeats
        # (each report kept under its own name).
        bases = [run("base%d" % k, cases[0][1]) for k in range(args.repeat)]
        base = median_run(bases, lambda r: r[1]["results"]["step_time_s"]["median"])[0]
        print("# calibrated from %s of %d runs of the first case's flags (the median step); "
              "each line: %d runs" % (os.path.basename(base), args.repeat, args.repeat))
        print("%-28s %10s %10s %7s %11s  %s" % (
            "run", "measured", "expected", "m/e", "m/e range",
            "phases of the rank that set the step, median run: measured/expected (ms)"))
        for i, (name, flags) in enumerate(cases):
            calib = ["--system", "cpu", "--calibrate", base]
            expected = [run("case%d-%d" % (i, k), flags + calib)[1]["expected"]
                        for k in range(args.repeat)]
            mid = median_run(expected, ratio)
            ratios = [ratio(e) for e in expected]
            cells = ["%s %.1f/%.1f" % (p["phase"], 1e3 * p["measured_s"], 1e3 * p["expected_s"])
                     for p in mid["phases"] if p["measured_s"] > 0 or p["expected_s"] > 0]
            print("%-28s %8.1fms %8.1fms %7.2f %5.2f-%4.2f  rank %d: %s" % (
                name, 1e3 * mid["measured_step_s"], 1e3 * mid["expected_step_s"], ratio(mid),
                min(ratios), max(ratios), mid["pp_rank"], ", ".join(cells)))
            sys.stdout.flush()


if __name__ == "__main__":
    main()
