#!/usr/bin/env python3
"""Draws a moebench prediction (reports/predict.schema.json) as one PNG: the predicted TFLOP/s per
GPU against the GPU count (log scale), with the published rows of the same system drawn as points
on it, and beside it each GPU count's step split into its phases.

    python3 reports/plot_predict.py predict.json predict.png

`moebench predict --plot FILE.png` runs it with the system's python3. Exit status 3 when
matplotlib cannot be imported (Debian/Ubuntu: apt-get install python3-matplotlib), 2 for bad
arguments.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import plot_support  # noqa: E402  (beside this script)


def main(argv):
    return plot_support.run(argv, "plot_predict.py", "moebench.predict", draw)


def draw(plt, report, out):
    points = report["points"]
    gpus = [p["gpus"] for p in points]
    tflops = [p["prediction"]["tflops_per_gpu"] for p in points]
    workload = report["workload"]
    what = ("recipe " + workload["recipe"]) if workload["recipe"] else workload["model"]
    how = "calibrated from " + report["calibration"]["report"] if report["calibration"] else \
        report["generation"] + " efficiencies"
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 5.2))
    fig.suptitle("moebench predict: %s on %s (%s)" % (what, report["system"], how), fontsize=12)
    left.plot(gpus, tflops, "o-", color="tab:blue", label="predicted")
    for g, t in zip(gpus, tflops):
        left.annotate("%.0f" % t, (g, t), textcoords="offset points", xytext=(0, 7),
                      ha="center", fontsize=8)
    # The published rows as numbered points, named in a box (several share a GPU count).
    lines = []
    for i, p in enumerate(report["published_points"], 1):
        left.plot([p["gpus"]], [p["tflops_per_gpu"]], "s", color="tab:red")
        left.annotate(str(i), (p["gpus"], p["tflops_per_gpu"]), textcoords="offset points",
                      xytext=(6 + 8 * (i - 1), -4), fontsize=7, color="tab:red")
        lines.append("%d: %s, %d GPUs, %.0f" % (i, p["recipe"], p["gpus"], p["tflops_per_gpu"]))
    if lines:
        left.plot([], [], "s", color="tab:red", label="published (%s)" % report["system"])
        left.text(0.98, 0.04, "\n".join(lines), transform=left.transAxes, ha="right",
                  va="bottom", fontsize=7, color="tab:red",
                  bbox=dict(facecolor="white", edgecolor="tab:red", alpha=0.8))
    left.set_xscale("log", base=2)
    left.set_xticks(gpus)
    left.set_xticklabels([str(g) for g in gpus])
    left.set_xlabel("GPUs")
    left.set_ylabel("TFLOP/s per GPU (Megatron's FLOPs)")
    left.set_ylim(bottom=0)
    left.grid(alpha=0.3)
    left.legend(loc="lower left")
    names = list(points[0]["prediction"]["phase_time_s"])
    bottoms = [0.0] * len(points)
    cmap = plt.get_cmap("tab20")
    for i, name in enumerate(names):
        values = [p["prediction"]["phase_time_s"][name] for p in points]
        if not any(values):
            continue
        right.bar(range(len(points)), values, bottom=bottoms, color=cmap(i % 20), label=name)
        bottoms = [b + v for b, v in zip(bottoms, values)]
    right.set_xticks(range(len(points)))
    right.set_xticklabels([str(g) for g in gpus])
    right.set_xlabel("GPUs")
    right.set_ylabel("step time (s), the rank that sets it")
    right.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    fig.tight_layout()
    fig.savefig(out, format="png", dpi=110)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
