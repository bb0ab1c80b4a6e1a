#!/usr/bin/env python3
"""Benchmark, not a test: `moebench predict --calibrate` on the cpu backend against measured runs.

Calibrates from one measured run of 4 ranks (the tiny preset's shapes with 4 layers, EP 2, one
micro-batch a rank, all-reduce) and predicts other runs of the same 4 ranks: more layers, a larger
global batch, pp 2 with vp 1 and 2, ZeRO-1 (reduce-scatter) against all-reduce. Each is run with
`--system cpu --calibrate` the first run's report, whose `expected` section holds the model's step
and phases for the pipeline rank that set the measured step time; they are printed beside what
that rank measured. On an oversubscribed host the ranks share cores (a waiting rank lends its core
to a computing one): read the ratios, not the absolute times.

    python3 tests/bench/predict_calibration.py --binary build/moebench [--steps 10]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

from tiny_model import write_tiny_model  # beside this script

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--steps", type=int, default=10)
    args = ap.parse_args()
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
        base = None
        print("%-28s %10s %10s %7s  %s" % ("run", "measured", "expected", "m/e",
                                           "phases of the rank that set the step: "
                                           "measured/expected (ms)"))
        for i, (name, flags) in enumerate(cases):
            out = os.path.join(tmp, "run%d.json" % i)
            # The calibration run is calibrated from a first run of the same flags.
            calib = ["--system", "cpu", "--calibrate", base] if base else []
            if base is None:
                base = os.path.join(tmp, "base.json")
                subprocess.run(["mpirun", "--oversubscribe", "-np", "4", args.binary, "run",
                                "--quiet", "--steps", str(args.steps), "--out", base] + common +
                               flags, check=True, env=env, capture_output=True)
                calib = ["--system", "cpu", "--calibrate", base]
            subprocess.run(["mpirun", "--oversubscribe", "-np", "4", args.binary, "run",
                            "--quiet", "--steps", str(args.steps), "--out", out] + common +
                           flags + calib, check=True, env=env, capture_output=True)
            with open(out) as f:
                expected = json.load(f)["expected"]
            cells = ["%s %.1f/%.1f" % (p["phase"], 1e3 * p["measured_s"], 1e3 * p["expected_s"])
                     for p in expected["phases"] if p["measured_s"] > 0 or p["expected_s"] > 0]
            print("%-28s %8.1fms %8.1fms %7.2f  rank %d: %s" % (
                name, 1e3 * expected["measured_step_s"], 1e3 * expected["expected_step_s"],
                expected["measured_step_s"] / expected["expected_step_s"], expected["pp_rank"],
                ", ".join(cells)))
            sys.stdout.flush()


if __name__ == "__main__":
    main()
