#!/usr/bin/env python3
"""One model held to every public row: `moebench predict` on each row of bench/rows.json with the
row's settings, its prediction over the published figure (tokens/s per GPU where the row gives it,
else TFLOP/s per GPU), the median and the worst over the rows the model prices, and the rows it
refuses (naming the feature) or that publish too little to price.

    python3 bench/predict_rows.py [--binary build/moebench] [--check] [--markdown]
                                  [--write-docs docs/predicting.md | --check-docs docs/predicting.md]

--check exits 1 unless the median |predicted / published - 1| is at most 15% and none is beyond
30% (issue 47's bar), every refused row is refused naming the feature its row lists, no row that
lists a feature is priced, and every priced row fits its GPU in the trainer's memory estimate (it
ran there); --markdown prints the docs' table; --write-docs and
--check-docs rewrite or compare that table between the markers in the file.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
BEGIN = "<!-- rows: produced by python3 bench/predict_rows.py --write-docs; do not edit -->"
END = "<!-- rows: end -->"
MEDIAN_BAR, WORST_BAR = 0.15, 0.30


def predict(binary, row):
    """The row priced: (status, figure or reason)."""
    if row["predict"] is None:
        return "not priced", row["not_priced"]
    args = [binary, "predict", "--gpus", str(row["gpus"])]
    if "--system" not in row["predict"]:
        args += ["--system", row["system"]]
    args += row["predict"] + ["--json"]
    r = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=300)
    if r.returncode == 2:
        return "refused", r.stderr.strip().removeprefix("moebench: ")
    if r.returncode != 0:
        raise SystemExit("predict_rows: %s: exit %d: %s" % (row["id"], r.returncode, r.stderr))
    point = json.loads(r.stdout)["points"][0]
    q, pub = point["prediction"], row["published"]
    fits = point["memory"]["trainer"]["fits"]  # as the row's trainer keeps it
    if pub["tokens_per_s_per_gpu"]:
        return "priced", (q["tokens_per_s_per_gpu"], pub["tokens_per_s_per_gpu"], "tok/s", fits)
    return "priced", (q["tflops_per_gpu"], pub["tflops_per_gpu"], "TFLOP/s", fits)


def evaluate(binary, rows):
    results = []
    for row in rows:
        status, what = predict(binary, row)
        results.append((row, status, what))
    return results


def summary(results):
    ratios = [(what[0] / what[1], row["id"]) for row, status, what in results
              if status == "priced"]
    devs = sorted(abs(r - 1) for r, _ in ratios)
    worst = max(ratios, key=lambda x: abs(x[0] - 1))
    return {"priced": len(ratios), "rows": len(results),
            "refused": sum(s == "refused" for _, s, _ in results),
            "not_priced": sum(s == "not priced" for _, s, _ in results),
            "median_dev": statistics.median(devs), "worst": worst,
            "within_15": sum(d <= MEDIAN_BAR for d in devs)}


def markdown(results):
    s = summary(results)
    out = [BEGIN,
           "| row | system | GPUs | layout (TP/PP/VP/EP), MBS, GBS | precision | published | "
           "predicted | predicted / published |",
           "|---|---|---|---|---|---|---|---|"]
    for row, status, what in results:
        lay = "%d/%d/%d/%d, %d, %d" % (row["tp"], row["pp"], row["vp"], row["ep"],
                                        row["micro_batch"], row["global_batch"])
        head = "| `%s` | %s | %d | %s | %s |" % (row["id"], row["system"], row["gpus"], lay,
                                                 row["precision"])
        if status == "priced":
            out.append("%s %s %s | %s | %.3f |" % (head, fmt(what[1]), what[2], fmt(what[0]),
                                                   what[0] / what[1]))
        else:
            pub = row["published"]
            figure = ("%s tok/s" % fmt(pub["tokens_per_s_per_gpu"])
                      if pub["tokens_per_s_per_gpu"] else
                      "%s TFLOP/s" % fmt(pub["tflops_per_gpu"]))
            label = "refused: " + ", ".join(row["features"]) if status == "refused" else \
                "not priced: " + ("; ".join(row["features"]) or "settings not published")
            out.append("%s %s | %s | |" % (head, figure, label))
    out.append("")
    out.append("Priced %d of %d rows (%d refused, %d not priced): median |predicted / published - 1| "
               "%.1f%%, worst %.1f%% (`%s`), %d of %d within 15%%." %
               (s["priced"], s["rows"], s["refused"], s["not_priced"], 100 * s["median_dev"],
                100 * abs(s["worst"][0] - 1), s["worst"][1], s["within_15"], s["priced"]))
    out.append(END)
    return "\n".join(out)


def fmt(v):
    return ("%.0f" % v) if v >= 100 else ("%.1f" % v)


def print_table(results):
    print("%-28s %-14s %5s %10s %10s %8s  %s" % ("row", "system", "gpus", "published",
                                                 "predicted", "ratio", "status"))
    for row, status, what in results:
        if status == "priced":
            print("%-28s %-14s %5d %10s %10s %8.3f  priced (%s)" % (
                row["id"], row["system"], row["gpus"], fmt(what[1]), fmt(what[0]),
                what[0] / what[1], what[2]))
        else:
            print("%-28s %-14s %5d %10s %10s %8s  %s: %s" % (row["id"], row["system"], row["gpus"],
                                                            "", "", "", status, what))
    s = summary(results)
    print("# priced %d of %d rows (%d refused, %d not priced); median |predicted/published - 1| "
          "%.1f%%, worst %.1f%% (%s); %d of %d within 15%%" %
          (s["priced"], s["rows"], s["refused"], s["not_priced"], 100 * s["median_dev"],
           100 * abs(s["worst"][0] - 1), s["worst"][1], s["within_15"], s["priced"]))


def check(results):
    """Issue 47's bar and the file's consistency; the failures, one line each."""
    failures = []
    s = summary(results)
    if s["median_dev"] > MEDIAN_BAR:
        failures.append("median |predicted/published - 1| %.3f > %.2f" %
                        (s["median_dev"], MEDIAN_BAR))
    if abs(s["worst"][0] - 1) > WORST_BAR:
        failures.append("%s: predicted/published %.3f, beyond %.0f%%" %
                        (s["worst"][1], s["worst"][0], 100 * WORST_BAR))
    for row, status, what in results:
        if status == "refused":
            # The line names the feature the row lists (the first one refused).
            if not row["features"] or not any(f.lower() in what.lower() for f in row["features"]):
                failures.append("%s: refused, but not for %r: %s" % (row["id"], row["features"],
                                                                     what))
        elif status == "priced" and row["features"]:
            failures.append("%s: priced although it ran %r" % (row["id"], row["features"]))
        elif status == "priced" and not what[3]:
            # It ran on that GPU: a trainer's estimate over its memory misses a saving it made.
            failures.append("%s: the trainer's memory estimate does not fit its GPU" % row["id"])
    return failures


def replace_block(text, block, path):
    if BEGIN not in text or END not in text:
        raise SystemExit("predict_rows: %s has no %r ... %r block" % (path, BEGIN, END))
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return head + block + tail


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--binary", default=os.path.join(REPO, "build", "moebench"))
    p.add_argument("--rows", default=os.path.join(HERE, "rows.json"))
    p.add_argument("--check", action="store_true")
    p.add_argument("--markdown", action="store_true")
    p.add_argument("--write-docs")
    p.add_argument("--check-docs")
    a = p.parse_args()
    binary = os.path.abspath(a.binary)
    with open(a.rows) as f:
        rows = json.load(f)["rows"]
    results = evaluate(binary, rows)
    block = markdown(results)
    if a.markdown:
        print(block)
    else:
        print_table(results)
    rc = 0
    if a.write_docs:
        with open(a.write_docs) as f:
            text = f.read()
        with open(a.write_docs, "w") as f:
            f.write(replace_block(text, block, a.write_docs))
    if a.check_docs:
        with open(a.check_docs) as f:
            text = f.read()
        if replace_block(text, block, a.check_docs) != text:
            print("predict_rows: %s's table differs from this build's; run python3 "
                  "bench/predict_rows.py --write-docs %s" % (a.check_docs, a.check_docs),
                  file=sys.stderr)
            rc = 1
    if a.check:
        for line in check(results):
            print("predict_rows: " + line, file=sys.stderr)
            rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
