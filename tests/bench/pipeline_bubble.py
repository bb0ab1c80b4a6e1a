#!/usr/bin/env python3
"""Benchmark, not a test: the pipeline bubble measured on the cpu backend beside (P - 1) / (V m).

Runs the tiny preset's shapes with 8 layers (so that P x V = 8 stages hold a layer each) at
(P, V, m) = (2, 1, 8), (4, 1, 8) and (4, 2, 8), one rank per stage (dp 1), and prints each run's
measured bubble (the mean over ranks of the pp_bubble phase over the rest of the step) beside the
theoretical one. On an oversubscribed host (more ranks than cores) the ranks share cores, so a
waiting rank's MPI polling takes time from a computing one: compare the ratios within one run.

Each shape runs twice: the decoder alone (--head off: equal stages, the schedule's own bubble,
which is what (P - 1) / (V m) assumes) and the whole model (the embedding on the first stage, the
head, loss and MTP layer on the last: unequal stages, whose imbalance adds to the bubble unless
the layout gives the last stage fewer layers, as the published layouts do).

    python3 tests/bench/pipeline_bubble.py --binary build/moebench [--steps 5]
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
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--seq-len", type=int, default=128)
    args = ap.parse_args()
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_mpi_yield_when_idle="1")
    with tempfile.TemporaryDirectory() as tmp:
        cfg = write_tiny_model(args.binary, tmp, num_hidden_layers=8, first_k_dense_replace=2)
        print("%-8s %3s %3s %3s %12s %12s %10s %14s" % ("model", "P", "V", "m", "theoretical",
                                                         "measured", "ratio", "step (ms)"))
        for head, (pp, vp, m) in [(h, s) for h in ("off", "on")
                                  for s in ((2, 1, 8), (4, 1, 8), (4, 2, 8))]:
            out = os.path.join(tmp, "r.json")
            cmd = ["mpirun", "-np", str(pp), "--oversubscribe", args.binary, "run",
                   "--model-config", cfg, "--seq-len", str(args.seq_len), "--pp", str(pp),
                   "--vp", str(vp), "--global-batch", str(m), "--head", head, "--warmup", "1",
                   "--steps", str(args.steps), "--quiet", "--out", out]
            subprocess.run(cmd, check=True, env=env, capture_output=True)
            with open(out) as f:
                rep = json.load(f)
            p = rep["parallel"]["pipeline"]
            step = rep["results"]["step_time_s"]["median"]
            print("%-8s %3d %3d %3d %12.4f %12.4f %10.2f %14.1f" % (
                "decoder" if head == "off" else "whole", pp, vp, m, p["theoretical_bubble"], p["measured_bubble"],
                p["measured_bubble"] / p["theoretical_bubble"], step * 1e3), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
