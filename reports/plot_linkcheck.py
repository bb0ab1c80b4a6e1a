#!/usr/bin/env python3
"""Draws a moebench link test (reports/linkcheck.schema.json) as one PNG with two heat maps:
bandwidth (GB/s) and latency (us) of every directed pair, source rank by row, destination rank
by column (latency on a log scale), with node boundaries in white, NVLink domain boundaries in
black and the outlier pairs boxed in red.

    python3 reports/plot_linkcheck.py linkcheck.json linkcheck.png

`moebench linkcheck --plot FILE.png` runs it with the system's python3. Exit status 3 when
matplotlib cannot be imported (Debian/Ubuntu: apt-get install python3-matplotlib), 2 for bad
arguments.
"""

import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import plot_support  # noqa: E402  (beside this script)


def main(argv):
    return plot_support.run(argv, "plot_linkcheck.py", "moebench.linkcheck", draw)


def masked(matrix, scale):
    """The matrix scaled, unmeasured pairs (null, the diagonal) as NaN so they stay blank."""
    return [[math.nan if v is None else v * scale for v in row] for row in matrix]


def draw(plt, report, out_path):
    ranks = report["ranks"]
    n = len(ranks)
    meta, config = report["meta"], report["config"]
    gpus = {d["rank"]: d for d in meta["devices"]}
    system = "%d ranks on %d node(s), %s over %s" % (
        n, len({r["node"] for r in ranks}), meta["backend"], meta["comm"])
    if gpus:
        names = sorted({d["name"] for d in gpus.values()})
        system = "%s x %d, " % ("/".join(names), len(gpus)) + system
    fig, axes = plt.subplots(1, 2, figsize=(13, 5.8))
    fig.suptitle("moebench linkcheck: %s (level %s, %s and %s-byte messages)" % (
        system, config["level"], human_bytes(config["large_bytes"]), config["small_bytes"]),
        fontsize=12)
    from matplotlib.colors import LogNorm
    # Latency on a log scale: one slow link must not wash out the others.
    panels = ((report["matrix"]["bandwidth"], 1e-9, "bandwidth (GB/s)", "viridis", None),
              (report["matrix"]["latency_s"], 1e6, "latency (us)", "magma_r", LogNorm()))
    boundaries = [i for i in range(1, n) if ranks[i]["node"] != ranks[i - 1]["node"]]
    domains = [i for i in range(1, n) if ranks[i]["domain"] != ranks[i - 1]["domain"]]
    for ax, (matrix, scale, label, cmap, norm) in zip(axes, panels):
        image = ax.imshow(masked(matrix, scale), cmap=cmap, norm=norm, interpolation="nearest")
        fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label=label)
        ax.set_title(label)
        ax.set_xlabel("destination rank")
        ax.set_ylabel("source rank")
        if n <= 32:
            ax.set_xticks(range(n))
            ax.set_yticks(range(n))
        for b in boundaries:  # node boundaries, white; NVLink domain boundaries, black
            ax.axhline(b - 0.5, color="white", linewidth=1.5)
            ax.axvline(b - 0.5, color="white", linewidth=1.5)
        for b in domains:
            ax.axhline(b - 0.5, color="black", linewidth=2)
            ax.axvline(b - 0.5, color="black", linewidth=2)
        for o in report["outliers"]:
            metric_panel = "bandwidth" if o["metric"] == "bandwidth" else "latency"
            if not label.startswith(metric_panel):
                continue
            a, b = o["a"]["rank"], o["b"]["rank"]
            for (row, col) in ((a, b), (b, a)):
                ax.add_patch(plt.Rectangle((col - 0.5, row - 0.5), 1, 1, fill=False,
                                           edgecolor="red", linewidth=2.5))
    outliers = ["%d-%d %s %.2fx" % (o["a"]["rank"], o["b"]["rank"], o["metric"], o["slowdown"])
                for o in report["outliers"]]
    fig.text(0.5, 0.02, "outliers (boxed): " + (", ".join(outliers[:12]) or "none"),
             ha="center", fontsize=10, color="darkred" if outliers else "black")
    fig.tight_layout(rect=(0, 0.05, 1, 0.95))
    fig.savefig(out_path, dpi=110, format="png")


def human_bytes(n):
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return "%d %s" % (n // size, unit)
    return "%d-byte" % n


if __name__ == "__main__":
    sys.exit(main(sys.argv))
