"""End-to-end: `moebench report` over real runs of the tiny preset at 1, 2, 4 and 8 ranks, and over
synthetic 256/512/1,024-GPU reports made from a real one (tests/e2e/report_fixtures.py).

Checks that the scaling JSON validates against reports/scaling.schema.json, that its figures
equal the inputs' (recomputed here from the run reports), that verdicts follow the thresholds both
ways with exit codes 0 and 4, that a failed verification never passes, and that the PNG is drawn.
"""

import atexit
import hashlib
import json
import os
import shutil
import struct
import tempfile

import moebench_e2e as e2e
import report_fixtures as fx
from moebench_e2e import check, check_close

EXIT_CLAIM = 4
SIZES = [1, 2, 4, 8]
# Relative tolerance for figures the report copies or divides once: JSON round-trips doubles
# exactly, so only the last bit of one division can differ.
REL = 1e-12

_state = {}


def workdir():
    if "dir" not in _state:
        _state["dir"] = tempfile.mkdtemp(prefix="moebench-e2e-report-")
        atexit.register(shutil.rmtree, _state["dir"], True)
    return _state["dir"]


def real_runs(ctx):
    """Real runs at 1, 2, 4 and 8 ranks (ep = ranks, as the CPU demo runs them), made once."""
    if "runs" not in _state:
        paths = []
        for np in SIZES:
            path = os.path.join(workdir(), "real", "run-np%d.json" % np)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            # Health is not under test here (test_health is): these ranks share two cores with
            # whatever ctest runs beside them, which has slowed one rank 1.55x past the cpu
            # default's 1.5x and made it a suspect, failing the merge tests; a suspect must be
            # 10x slower here.
            r = e2e.run_moebench(ctx, ["run", "--preset", "deepseek-v3-tiny", "--ep", np,
                                       "--warmup", 1, "--steps", 5, "--verify", "--quiet",
                                       "--health-min-slowdown", 9, "--out", path], np=np,
                                 timeout=300)
            check(r.rc == 0, "run at %d ranks failed" % np, r)
            paths.append(path)
        _state["runs"] = paths
    return _state["runs"]


def load(path):
    with open(path) as f:
        return json.load(f)


def scaling_errors(ctx, doc):
    import jsonschema
    schema = load(os.path.join(ctx.repo, "reports", "scaling.schema.json"))
    return ["%s: %s" % ("/".join(str(p) for p in e.absolute_path), e.message)
            for e in jsonschema.Draft7Validator(schema).iter_errors(doc)]


def report(ctx, args, out_dir=None, expect_rc=0):
    """Runs `moebench report ARGS --out DIR/s.json`; returns (result, the scaling JSON)."""
    out_dir = out_dir or tempfile.mkdtemp(dir=workdir())
    out = os.path.join(out_dir, "s.json")
    r = e2e.run_moebench(ctx, ["report"] + list(args) + ["--out", out], timeout=60)
    check(r.rc == expect_rc, "moebench report exited %s, expected %s" % (r.rc, expect_rc), r)
    doc = load(out)
    errors = scaling_errors(ctx, doc)
    check(not errors, "scaling report does not validate:\n  " + "\n  ".join(errors[:10]))
    return r, doc


def verdicts(doc, name):
    return [v for v in doc["verdicts"] if v["name"] == name]


def test_real_runs_merged_figures_equal_inputs(ctx):
    paths = real_runs(ctx)
    md = os.path.join(workdir(), "real.md")
    r, doc = report(ctx, paths + ["--allow-mixed", "ep", "--markdown", md])
    runs = [load(p) for p in paths]
    check(doc["scaling"]["mode"] == "weak", "tiny preset at 128 tokens per rank is weak scaling")
    check(doc["scaling"]["baseline_gpus"] == 1, "baseline is the smallest size")
    check(doc["workload"]["mixed_fields"] == ["parallel.ep"], "ep is the mixed field")
    check([s["gpus"] for s in doc["sizes"]] == SIZES, "one size per GPU count")
    base_tflops = runs[0]["results"]["tflops_per_gpu"]
    for size, run, path in zip(doc["sizes"], runs, paths):
        res = run["results"]
        n = run["parallel"]["world"]
        check(size["runs"] == 1 and size["nodes"] == run["parallel"]["nodes"], "layout of %d" % n)
        check_close(size["step_time_s"]["median"], res["step_time_s"]["median"], REL, "step %d" % n)
        check_close(size["tflops_per_gpu"]["median"], res["tflops_per_gpu"], REL, "TFLOP/s %d" % n)
        check_close(size["tokens_per_s_per_gpu"]["median"], res["tokens_per_s_per_gpu"], REL,
                    "tokens/s %d" % n)
        check_close(size["exposed_communication_share"],
                    res["exposed_communication_s"] / res["step_time_s"]["median"], REL,
                    "exposed share %d" % n)
        check_close(size["efficiency"], res["tflops_per_gpu"] / base_tflops, REL, "eff %d" % n)
        check_close(size["speedup"], res["tflops_per_gpu"] / base_tflops * n, REL, "speedup %d" % n)
        # phase_time_s: the step breakdown (the rank that sets the step time, adding up to its
        # step); phase_max_s: each phase's slowest rank.
        own = res["step_breakdown"]
        for phase, value in res["phases"].items():
            check_close(size["phase_time_s"][phase], own["phase_time_s"][phase], REL,
                        "%s at %d" % (phase, n))
            check_close(size["phase_max_s"][phase], value["time_s"]["median"], REL,
                        "%s max at %d" % (phase, n))
        check_close(sum(own["phase_time_s"].values()) + own["other_s"], own["step_time_s"], REL,
                    "the breakdown at %d adds up to its step" % n)
        for phase in ("dispatch", "combine", "grad_reduce"):
            check_close(size["busbw"][phase], res["phases"][phase]["busbw"], REL,
                        "%s busbw at %d" % (phase, n))
        check(size["verification"] == "passed", "every real run was verified")
    for inp, path in zip(doc["inputs"], paths):
        with open(path, "rb") as f:
            check(inp["sha256"] == hashlib.sha256(f.read()).hexdigest(), "SHA-256 of " + path)
        check(inp["path"] == path and inp["synthetic"] is False, "provenance of " + path)
    check(doc["passed"] is True and len(verdicts(doc, "verification")) == 4, "4 verification PASS")
    # the terminal table has one row per size, and the Markdown the same table
    rows = [l for l in r.stdout.splitlines() if l.strip() and not l.startswith("#")]
    check(len(rows) == 4, "4 table rows on stdout", r)
    with open(md) as f:
        text = f.read()
    check("| GPUs | nodes | runs | step (ms) |" in text and text.count("| passed |") >= 4,
          "Markdown table")
    # Who was measured: the runs' own system line, in every form of the report.
    systems = {run["meta"]["system"]["software"] for run in runs}
    check(len(systems) == 1 and all(run["meta"]["system"]["accelerator"] == "cpu" and
                                    run["meta"]["system"]["gpus"] == 0 for run in runs),
          "the run reports name a cpu system without GPUs: %r" % [run["meta"]["system"] for run in runs])
    desc = doc["system"]["description"]
    check(doc["system"]["accelerator"] == "cpu" and doc["system"]["gpu"] is False and
          desc.startswith("cpu backend, no GPU (") and systems.pop() in desc and
          desc.endswith("1 to 8 ranks on 1 node"), "the scaling report's system: %r" % desc)
    check("# system: " + desc in r.stdout, "the table names the system", r)
    check("- system: " in text and "cpu backend, no GPU" in text, "the Markdown names the system")


def test_real_runs_verdicts_follow_thresholds_both_ways(ctx):
    paths = real_runs(ctx)
    runs = [load(p) for p in paths]
    tflops = [r["results"]["tflops_per_gpu"] for r in runs]
    eff8 = tflops[-1] / tflops[0]
    # passing: thresholds below every measured value
    _, doc = report(ctx, paths + ["--allow-mixed", "ep", "--min-tflops", min(tflops) * 0.5,
                                  "--claim-efficiency", eff8 * 0.9])
    check(all(v["passed"] for v in doc["verdicts"]) and doc["passed"], "all verdicts PASS")
    claim = verdicts(doc, "claim_efficiency")[0]
    check(claim["gpus"] == 8 and claim["baseline_gpus"] == 1, "claim judged at 8 vs 1")
    check_close(claim["measured"], eff8, REL, "claimed efficiency measured")
    check_close(claim["margin"], eff8 - eff8 * 0.9, 1e-9, "margin")
    # failing: the same checks with thresholds above
    r, doc = report(ctx, paths + ["--allow-mixed", "ep", "--min-tflops", max(tflops) * 2,
                                  "--claim-efficiency", eff8 * 1.1], expect_rc=EXIT_CLAIM)
    check(len(verdicts(doc, "min_tflops")) == 4 and
          not any(v["passed"] for v in verdicts(doc, "min_tflops")), "min_tflops FAIL at each size")
    check(not verdicts(doc, "claim_efficiency")[0]["passed"], "claim_efficiency FAIL")
    check(doc["passed"] is False and "# verdict: FAIL" in r.stdout, "overall FAIL", r)


def test_directory_and_glob_inputs(ctx):
    paths = real_runs(ctx)
    folder = os.path.dirname(paths[0])
    _, a = report(ctx, [folder, "--allow-mixed", "ep"])
    _, b = report(ctx, [os.path.join(folder, "run-np*.json"), "--allow-mixed", "ep"])
    check([i["path"] for i in a["inputs"]] == sorted(paths), "directory lists its reports, sorted")
    check(len(b["inputs"]) == 4, "the quoted glob is expanded by moebench")


def synthetic_set(ctx, name, tflops_by_size, **kw):
    """Writes the DeepSeek-V3 256/512/1,024 fixtures into a folder of their own."""
    folder = os.path.join(workdir(), name)
    os.makedirs(folder, exist_ok=True)
    if "dsv3" not in _state:
        real = load(real_runs(ctx)[1])
        _state["dsv3"] = fx.use_model(real, fx.dsv3_plan(ctx.binary))
    paths = []
    for (gpus, tflops, comm) in tflops_by_size:
        doc = fx.synthetic_run(_state["dsv3"], gpus, tflops, comm, ep=64,
                               verification_passed=kw.get("verified", {}).get(gpus, True))
        paths.append(fx.write(doc, os.path.join(folder, "run-%d.json" % gpus)))
    return paths


def test_synthetic_256_512_1024_claims(ctx):
    paths = synthetic_set(ctx, "dsv3-pass", fx.DSV3_SET)
    _, doc = report(ctx, paths + ["--claim-efficiency", 0.97, "--claim-tflops", 1600])
    check([s["gpus"] for s in doc["sizes"]] == [256, 512, 1024], "sizes")
    check([s["nodes"] for s in doc["sizes"]] == [32, 64, 128], "nodes of 8 GPUs")
    check_close(doc["sizes"][1]["efficiency"], 1624 / 1648, 1e-12, "512-GPU efficiency")
    check_close(doc["sizes"][2]["efficiency"], 1606 / 1648, 1e-12, "1024-GPU efficiency")
    claim = verdicts(doc, "claim_efficiency")[0]
    check(claim["passed"] and claim["threshold"] == 0.97, "0.97 claim passes at 0.9745")
    check_close(claim["margin"], 1606 / 1648 - 0.97, 1e-9, "claim margin")
    check(verdicts(doc, "claim_tflops")[0]["passed"], "1606 >= 1600")
    check(all(i["synthetic"] for i in doc["inputs"]), "inputs marked synthetic")
    check(any("SYNTHETIC" in w for w in doc["warnings"]), "synthetic warning")
    check(all(i["job_id"] == str(900000 + i["gpus"]) for i in doc["inputs"]), "job ids")

    failing = [(g, t if g != 1024 else fx.FAILING_1024, c) for g, t, c in fx.DSV3_SET]
    paths = synthetic_set(ctx, "dsv3-fail", failing)
    r, doc = report(ctx, paths + ["--claim-efficiency", 0.97], expect_rc=EXIT_CLAIM)
    claim = verdicts(doc, "claim_efficiency")[0]
    check(not claim["passed"], "0.97 claim fails at 0.9612")
    check_close(claim["measured"], fx.FAILING_1024 / 1648, 1e-12, "failing efficiency")
    check("FAIL  claim_efficiency" in r.stdout, "terminal shows the failed claim", r)


def test_failed_verification_never_passes(ctx):
    paths = synthetic_set(ctx, "dsv3-unverified", fx.DSV3_SET, verified={512: False})
    _, doc = report(ctx, paths + ["--min-tflops", 1, "--min-efficiency", 0.5],
                    expect_rc=EXIT_CLAIM)
    check(not verdicts(doc, "verification")[1]["passed"], "512-GPU verification verdict FAIL")
    at512 = [v for v in doc["verdicts"] if v["gpus"] == 512 and v["name"] != "verification"]
    check(at512 and not any(v["passed"] for v in at512),
          "thresholds met at 512 GPUs still FAIL: the run failed verification")
    check(all(v["passed"] for v in doc["verdicts"] if v["gpus"] != 512), "other sizes PASS")


def test_repeats_and_strong_scaling(ctx):
    real = load(real_runs(ctx)[1])
    folder = os.path.join(workdir(), "strong")
    os.makedirs(folder)
    paths = []
    # global batch of 4 sequences: micro-batch 4, 2, 1 at 1, 2, 4 GPUs; two repeats at 2 GPUs
    for gpus, mb, tflops, tag in [(1, 4, 0.03, "a"), (2, 2, 0.025, "a"), (2, 2, 0.027, "b"),
                                  (4, 1, 0.02, "a")]:
        doc = fx.synthetic_run(real, gpus, tflops, 0.2, ep=1, micro_batch=mb)
        paths.append(fx.write(doc, os.path.join(folder, "run-%d%s.json" % (gpus, tag))))
    r = e2e.run_moebench(ctx, ["report"] + paths)
    check(r.rc == e2e.EXIT_USAGE and "--allow-mixed micro_batch" in r.stderr,
          "per-GPU work differs without --allow-mixed", r)
    _, doc = report(ctx, paths + ["--allow-mixed", "micro_batch"])
    check(doc["scaling"]["mode"] == "strong", "global batch fixed: strong scaling")
    steps = {}
    for p in paths:
        d = load(p)
        steps.setdefault(d["parallel"]["world"], []).append(d["results"]["step_time_s"]["median"])
    two = doc["sizes"][1]
    check(two["runs"] == 2, "repeats combined")
    check_close(two["step_time_s"]["median"], sum(steps[2]) / 2, REL, "median of two repeats")
    check_close(two["step_time_s"]["relative_spread"],
                (max(steps[2]) - min(steps[2])) / (sum(steps[2]) / 2), 1e-9, "spread")
    for size in doc["sizes"]:
        n = size["gpus"]
        speedup = steps[1][0] / size["step_time_s"]["median"]
        check_close(size["speedup"], speedup, REL, "speedup at %d" % n)
        check_close(size["efficiency"], speedup / n, REL, "efficiency at %d" % n)


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    check(head[:8] == b"\x89PNG\r\n\x1a\n", "%s is a PNG" % path)
    return struct.unpack(">II", head[16:24])


def test_plot_png(ctx):
    paths = synthetic_set(ctx, "dsv3-plot", fx.DSV3_SET)
    png = os.path.join(workdir(), "scaling.png")
    r, _ = report(ctx, paths + ["--claim-efficiency", 0.97, "--claim-tflops", 1648,
                                "--plot", png], expect_rc=EXIT_CLAIM)
    check("# plot: %s" % png in r.stdout, "the PNG's path is printed", r)
    check(os.path.getsize(png) > 20000, "PNG is not empty")
    width, height = png_size(png)
    check(width > 2.5 * height, "three panels side by side (%dx%d)" % (width, height))


def test_plot_without_matplotlib(ctx):
    # python3 -S leaves out site-packages, so matplotlib cannot be imported.
    wrapper = os.path.join(workdir(), "python-without-site")
    with open(wrapper, "w") as f:
        f.write("#!/bin/sh\nexec /usr/bin/python3 -S \"$@\"\n")
    os.chmod(wrapper, 0o755)
    paths = real_runs(ctx)
    out_dir = tempfile.mkdtemp(dir=workdir())
    png = os.path.join(out_dir, "s.png")
    os.environ["MOEBENCH_PYTHON"] = wrapper
    try:
        r, doc = report(ctx, paths + ["--allow-mixed", "ep", "--plot", png], out_dir=out_dir)
    finally:
        del os.environ["MOEBENCH_PYTHON"]
    check("apt-get install python3-matplotlib" in r.stderr and "not drawn" in r.stderr,
          "the message says how to get matplotlib", r)
    check(not os.path.exists(png) and doc["kind"] == "moebench.scaling",
          "no PNG; the JSON is written and the exit code is the verdicts' (0)")


if __name__ == "__main__":
    e2e.run_main([test_real_runs_merged_figures_equal_inputs,
                  test_real_runs_verdicts_follow_thresholds_both_ways,
                  test_directory_and_glob_inputs, test_synthetic_256_512_1024_claims,
                  test_failed_verification_never_passes, test_repeats_and_strong_scaling,
                  test_plot_png, test_plot_without_matplotlib])
