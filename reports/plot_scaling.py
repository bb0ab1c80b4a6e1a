#!/usr/bin/env python3
"""Draws a moebench scaling report (reports/scaling.schema.json) as one PNG with three panels:
TFLOP/s per GPU against GPU count (with the ideal line and the claimed value), efficiency against
GPU count (with the claimed threshold), and the step time split into phases, stacked, per size.

    python3 reports/plot_scaling.py scaling.json scaling.png

`moebench report --plot FILE.png` runs it with the system's python3. Exit status 3 when matplotlib
cannot be imported (Debian/Ubuntu: apt-get install python3-matplotlib), 2 for bad arguments.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import plot_support  # noqa: E402  (beside this script)

def main(argv):
    return plot_support.run(argv, "plot_scaling.py", "moebench.scaling", draw)


def draw(plt, report, out_path):
    sizes = report["sizes"]
    gpus = [s["gpus"] for s in sizes]
    thresholds = report["thresholds"]
    scaling = report["scaling"]
    base = next(s for s in sizes if s["gpus"] == scaling["baseline_gpus"])
    synthetic = any(i.get("synthetic") for i in report["inputs"])

    fig, (ax_tf, ax_eff, ax_ph) = plt.subplots(1, 3, figsize=(17, 5.2))
    title = "%s: %s scaling, baseline %d GPU%s" % (
        report["workload"]["model"], scaling["mode"], base["gpus"], "" if base["gpus"] == 1 else "s")
    # The verdict says what it judged: a PASS of verifications alone is not a scaling claim.
    if report["verdicts"]:
        judged = sorted(set(v["name"] for v in report["verdicts"]))
        failed = sorted(set(v["name"] for v in report["verdicts"] if not v["passed"]))
        title += " - verdict %s (judged: %s)" % (
            "PASS" if report["passed"] else "FAIL: " + ", ".join(failed), ", ".join(judged))
    else:
        title += " - no verdict (no claim or threshold given)"
    if synthetic:
        title = "SYNTHETIC DATA (not measured) - " + title
    if report.get("system"):  # who was measured: GPU model, count, nodes, software
        title += "\n" + report["system"]["description"]
    fig.suptitle(title, fontsize=13, color="darkred" if synthetic else "black")

    # 1. TFLOP/s per GPU: medians with the repeats' range; ideal = the baseline's per-GPU rate.
    tf = [s["tflops_per_gpu"]["median"] for s in sizes]
    err = [[s["tflops_per_gpu"]["median"] - s["tflops_per_gpu"]["min"] for s in sizes],
           [s["tflops_per_gpu"]["max"] - s["tflops_per_gpu"]["median"] for s in sizes]]
    ax_tf.errorbar(gpus, tf, yerr=err, marker="o", capsize=4, label="measured (median, range)")
    ax_tf.axhline(base["tflops_per_gpu"]["median"], color="gray", linestyle="-", linewidth=1,
                  label="ideal (baseline per GPU)")
    if thresholds.get("claim_tflops") is not None:
        ax_tf.axhline(thresholds["claim_tflops"], color="tab:red", linestyle="--",
                      label="claimed %.4g" % thresholds["claim_tflops"])
    if thresholds.get("min_tflops") is not None:
        ax_tf.axhline(thresholds["min_tflops"], color="tab:orange", linestyle=":",
                      label="required %.4g" % thresholds["min_tflops"])
    for g, v in zip(gpus, tf):
        ax_tf.annotate("%.4g" % v, (g, v), textcoords="offset points", xytext=(0, 7),
                       ha="center", fontsize=8)
    ax_tf.set_title("TFLOP/s per GPU")
    ax_tf.set_ylabel("TFLOP/s per GPU")
    ax_tf.set_ylim(bottom=0, top=1.25 * max(tf + [thresholds.get("claim_tflops") or 0,
                                                 thresholds.get("min_tflops") or 0]))

    # 2. Efficiency against the baseline, with the claimed and required thresholds.
    eff = [s["efficiency"] for s in sizes]
    ax_eff.plot(gpus, eff, marker="o", color="tab:green", label="measured")
    ax_eff.axhline(1.0, color="gray", linestyle="-", linewidth=1, label="ideal 1.0")
    if thresholds.get("claim_efficiency") is not None:
        ax_eff.axhline(thresholds["claim_efficiency"], color="tab:red", linestyle="--",
                       label="claimed %.3g" % thresholds["claim_efficiency"])
    if thresholds.get("min_efficiency") is not None:
        ax_eff.axhline(thresholds["min_efficiency"], color="tab:orange", linestyle=":",
                       label="required %.3g" % thresholds["min_efficiency"])
    for g, v in zip(gpus, eff):
        ax_eff.annotate("%.3f" % v, (g, v), textcoords="offset points", xytext=(0, 7),
                        ha="center", fontsize=8)
    ax_eff.set_title("Efficiency (%s)" % scaling["mode"])
    ax_eff.set_ylabel("efficiency vs %d GPU%s" % (base["gpus"], "" if base["gpus"] == 1 else "s"))
    # Zoomed to the data and thresholds: 0.975 against a 0.97 claim must be visible.
    marks = eff + [1.0] + [thresholds[k] for k in ("claim_efficiency", "min_efficiency")
                           if thresholds.get(k) is not None]
    low, high = min(marks), max(marks)
    pad = max(0.02, 0.15 * (high - low))
    ax_eff.set_ylim(max(0.0, low - pad), high + pad)

    for ax in (ax_tf, ax_eff):
        ax.set_xscale("log", base=2)
        ax.set_xticks(gpus)
        ax.set_xticklabels([str(g) for g in gpus])
        ax.set_xlabel("GPUs")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, loc="lower left")

    # 3. Step time by phase, stacked per size; what the phases do not cover is "other". The phases
    # and their kinds are the report's own (its phase_table): communication and waits hatched.
    phases = [p["name"] for p in report["phase_table"]]
    waiting = {p["name"] for p in report["phase_table"] if p["kind"] != "compute"}
    cmap = plt.get_cmap("tab20")
    x = list(range(len(sizes)))
    bottom = [0.0] * len(sizes)
    for k, phase in enumerate(phases):
        ms = [1e3 * s["phase_time_s"][phase] for s in sizes]
        if not any(ms):
            continue
        ax_ph.bar(x, ms, bottom=bottom, color=cmap(k), label=phase,
                  hatch="//" if phase in waiting else None, edgecolor="white", linewidth=0.5)
        bottom = [b + m for b, m in zip(bottom, ms)]
    other = [max(0.0, 1e3 * s["step_time_s"]["median"] - b) for s, b in zip(sizes, bottom)]
    if any(o > 0 for o in other):
        ax_ph.bar(x, other, bottom=bottom, color="lightgray", label="other")
    steps = [1e3 * s["step_time_s"]["median"] for s in sizes]
    ax_ph.scatter(x, steps, marker="_", s=900, linewidths=2.5, color="black", zorder=3,
                  label="step time")
    for i, s in enumerate(sizes):
        ax_ph.annotate("%.4g ms" % (1e3 * s["step_time_s"]["median"]),
                       (i, 1e3 * s["step_time_s"]["median"]), textcoords="offset points",
                       xytext=(0, 4), ha="center", fontsize=8)
    ax_ph.set_xticks(x)
    ax_ph.set_xticklabels([str(g) for g in gpus])
    ax_ph.set_xlabel("GPUs")
    ax_ph.set_ylabel("ms per step (median)")
    # The phases of the rank that sets the step time, in its median step (phase_time_s): they add
    # up to about the step time, unlike each phase's slowest rank (phase_max_s).
    ax_ph.set_title("Step time by phase, on the rank that sets it (hatched: communication)")
    ax_ph.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0), markerscale=0.4)
    ax_ph.set_ylim(0, 1.12 * max(steps + bottom))

    fig.tight_layout(rect=(0, 0, 1, 0.94))
    fig.savefig(out_path, dpi=110, format="png")
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
