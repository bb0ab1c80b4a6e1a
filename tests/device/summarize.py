"""Writes the device check's one JSON summary (summary.json) from what tests/device/check.sh left:
its steps table, check.log, the run reports and the probe's bench.json; prints a short table
and exits 0 only when every step passed. Standard library only (it runs on the GPU machine).
"""

import argparse
import datetime
import json
import os
import re
import shutil
import subprocess
import sys

# The performance targets on one H200 (benchmarks, not pass/fail criteria of the check).
EXPERT_GEMM_TARGET_RATIO = 0.85
STEP_TARGET_FRACTION_OF_PEAK = 0.45


def command_output(cmd, timeout=30):
    """First lines of a command's output, or None when it is missing or fails."""
    if shutil.which(cmd[0]) is None and not os.path.isfile(cmd[0]):
        return None
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return None
    if r.returncode != 0:
        return None
    return r.stdout.strip()


def last_line_matching(pattern, text):
    found = None
    for line in text.splitlines():
        if re.search(pattern, line):
            found = line.strip()
    return found


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def versions(args, deps):
    v = {}
    smi = command_output(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,pci.bus_id",
                          "--format=csv,noheader"])
    v["gpus"] = smi.splitlines() if smi else None
    nvcc = command_output(["nvcc", "--version"]) or command_output(["/usr/local/cuda/bin/nvcc",
                                                                    "--version"])
    v["nvcc"] = last_line_matching(r"release", nvcc) if nvcc else None
    cmake = command_output(["cmake", "--version"])
    v["cmake"] = cmake.splitlines()[0] if cmake else None
    cxx = command_output(["c++", "--version"])
    v["cxx"] = cxx.splitlines()[0] if cxx else None
    v["python"] = sys.version.split()[0]
    try:
        from importlib import metadata
        for dist in ("torch", "nvidia-nccl-cu13", "nvidia-cublas", "nvidia-cudnn-cu13"):
            try:
                v[dist] = metadata.version(dist)
            except metadata.PackageNotFoundError:
                v[dist] = None
    except ImportError:
        pass
    ompi = command_output([os.path.join(deps, "openmpi", "bin", "mpirun"), "--version"])
    v["openmpi"] = ompi.splitlines()[0] if ompi else None
    moebench = command_output([os.path.join(args.build, "moebench"), "version"])
    v["moebench"] = moebench
    manifest = os.path.join(deps, "MANIFEST")
    if os.path.isfile(manifest):
        with open(manifest) as f:
            v["carried"] = [line.strip() for line in f if line.strip()]
    return v


def run_summary(doc):
    if doc is None:
        return None
    res = doc.get("results", {})
    ver = doc.get("verification", {})
    step = res.get("step_time_s", {})
    return {
        "world": doc.get("parallel", {}).get("world"),
        "ep": doc.get("parallel", {}).get("ep"),
        "backend": doc.get("meta", {}).get("backend"),
        "comm": doc.get("meta", {}).get("comm"),
        "devices": [d.get("name") + " " + d.get("pci_bus_id", "")
                    for d in doc.get("meta", {}).get("devices", [])],
        "verification_passed": ver.get("passed"),
        "compared": ver.get("compared"),
        "mismatches": ver.get("mismatches"),
        "max_rel_error": ver.get("max_rel_error"),
        "precision": doc.get("config", {}).get("precision"),
        "overlap": doc.get("config", {}).get("overlap"),
        "step_time_median_s": step.get("median"),
        "tflops_per_gpu": res.get("tflops_per_gpu"),
        "communication_overlap": res.get("communication_overlap"),
        "pipeline": {k: doc.get("parallel", {}).get("pipeline", {}).get(k)
                     for k in ("pp", "vp", "microbatches_per_step", "theoretical_bubble",
                               "measured_bubble")},
    }


def bench_summary(doc):
    if doc is None:
        return None
    res = doc["results"]
    dense = res["dense_gemm"]
    experts = res["expert_gemms"]
    peak = doc["peak"]
    stacks = []
    for s in res["layer_stacks"]:
        phases = sorted(s["phases"].items(), key=lambda kv: -kv[1]["time_s"])
        stacks.append({
            "layers": s["layers"],
            "step_time_median_s": s["step_time_s"]["median"],
            "tflops": s["tflops"],
            "fraction_of_peak": s["fraction_of_peak"],
            "forward_backward_tflops": s["forward_backward_tflops"],
            "forward_backward_fraction_of_peak": s["forward_backward_fraction_of_peak"],
            "tokens_per_s": s["tokens_per_s"],
            "top_phases": [{"phase": k, "time_s": p["time_s"], "share": p["share"],
                            "tflops": p["tflops"]} for k, p in phases[:5]],
        })
    device = doc["meta"].get("device") or {}
    return {
        "device": device.get("name"),
        "precision": doc["meta"].get("precision"),
        "gemm_path": doc["meta"].get("gemm_path"),
        "grouped_gemm_path": doc["meta"].get("grouped_gemm_path"),
        "attention_path": doc["meta"].get("attention_path"),
        "peak_tflops": peak["tflops"],
        "peak_source": peak["source"],
        "dense_gemm_n": dense["n"],
        "dense_gemm_tflops": dense["tflops"],
        "dense_gemm_events_tflops": dense["events_tflops"],
        "dense_gemm_fp8_tflops": (res.get("dense_gemm_fp8") or {}).get("tflops"),
        "dense_gemm_fp8_over_bf16": (res.get("dense_gemm_fp8") or {}).get("fp8_over_dense"),
        "fp8_gemms": res.get("fp8_gemms"),
        "expert_gemm_tflops": experts["tflops"],
        "expert_gemm_ratio_to_dense": experts["ratio_to_dense"],
        "expert_gemm_cases": {c["name"]: c["tflops"] for c in experts["cases"]},
        "core_attention": {
            c["implementation"]: {"forward_ms": c["forward_time_s"]["median"] * 1e3,
                                  "forward_backward_ms": c["time_s"]["median"] * 1e3,
                                  "tflops": c["tflops"], "fraction_of_peak": c["fraction_of_peak"],
                                  "path": c["path"]}
            for c in (res.get("core_attention") or {}).get("cases", [])},
        "core_attention_unavailable": {
            u["implementation"]: u["why"]
            for u in (res.get("core_attention") or {}).get("unavailable", [])},
        "layer_stacks": stacks,
        "targets": {
            "expert_gemm_ratio_ge_0.85": experts["ratio_to_dense"] >= EXPERT_GEMM_TARGET_RATIO,
            "step_ge_45pct_of_peak": {
                str(s["layers"]): (s["fraction_of_peak"] is not None and
                                   s["fraction_of_peak"] >= STEP_TARGET_FRACTION_OF_PEAK)
                for s in res["layer_stacks"]},
        },
    }


def test_counts(log_text):
    """The ctest and doctest totals check.log holds, as their own summary lines."""
    return {
        "ctest": last_line_matching(r"^\d+% tests passed, \d+ tests? failed out of", log_text),
        "doctest": last_line_matching(r"^\[doctest\] test cases:", log_text),
        "failed_tests": sorted(set(re.findall(r"^\s*\d+ - (\S+) \((?:Failed|Timeout|SEGFAULT|"
                                              r"Subprocess aborted|Not Run)", log_text, re.M))),
    }


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", required=True)
    p.add_argument("--steps", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--build", required=True)
    p.add_argument("--carried", required=True)
    p.add_argument("--cpu-only", default="0")
    p.add_argument("--wall-s", type=float, default=0)
    p.add_argument("--planned", default="", help="every step the run means to take, a,b,c")
    p.add_argument("--deadline-s", type=float, default=None)
    p.add_argument("--stopped", default="", help="why the check ended early, if it did")
    p.add_argument("--final", default="1", help="0: written after a step, more to come")
    args = p.parse_args()
    final = args.final == "1"
    deps = os.path.join(args.work, "deps")

    steps = []
    with open(args.steps) as f:
        for line in f:
            fields = line.rstrip("\n").split("\t")
            if len(fields) < 4:
                continue
            s = {"name": fields[0], "status": fields[1],
                 "exit_code": int(fields[2]) if fields[2] else None, "seconds": int(fields[3])}
            if len(fields) > 4:
                s["reason"] = fields[4]
            steps.append(s)
    log_path = os.path.join(args.out, "check.log")
    log_text = open(log_path, errors="replace").read() if os.path.isfile(log_path) else ""

    runs = {}
    for name in ("run-1gpu", "run-1gpu-nccl", "run-1gpu-fp8", "run-4rank", "run-4rank-pp"):
        summary = run_summary(load_json(os.path.join(args.out, name + ".json")))
        if summary is not None:
            runs[name] = summary
    benches = {}
    for name in ("bench", "bench-fp8"):
        try:
            benches[name] = bench_summary(load_json(os.path.join(args.out, name + ".json")))
        except (KeyError, TypeError) as e:
            benches[name] = {"error": "%s.json is not as expected: %r" % (name, e)}
    bench = benches["bench"]
    bench_fp8 = benches["bench-fp8"]
    if bench and bench_fp8 and "error" not in bench and "error" not in bench_fp8:
        # fp8 against bf16 for the whole step, per stack (the linear layers' share decides it)
        bf16_steps = {s["layers"]: s["step_time_median_s"] for s in bench["layer_stacks"]}
        bench_fp8["step_speedup_over_bf16"] = {
            str(s["layers"]): bf16_steps[s["layers"]] / s["step_time_median_s"]
            for s in bench_fp8["layer_stacks"]
            if s["layers"] in bf16_steps and s["step_time_median_s"]}

    failed = [s["name"] for s in steps if s["status"] not in ("passed", "skipped")]
    recorded = {s["name"] for s in steps}
    unfinished = [n for n in args.planned.split(",") if n and n not in recorded]
    summary = {
        "kind": "moebench.device_check",
        "schema_version": 1,
        "mode": "cpu-only dry run (CHECK_SH_CPU_ONLY=1)" if args.cpu_only == "1" else "gpu",
        # "running": written after a step, more to come; "complete": every planned step ran;
        # "stopped": it ended first (the deadline, a signal), unfinished_steps says what is missing
        "state": ("running" if not final else "stopped" if unfinished or args.stopped
                  else "complete"),
        "stopped_by": args.stopped or None,
        "deadline_s": args.deadline_s,
        "passed": (final and not unfinished and bool(steps) and not failed and
                   any(s["name"] == "bench" for s in steps)),
        "failed_steps": failed,
        "unfinished_steps": unfinished,
        "finished": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "wall_s": args.wall_s,
        "steps": steps,
        "tests": test_counts(log_text),
        "runs": runs,
        "bench": bench,
        "bench_fp8": bench_fp8,
        "versions": versions(args, deps),
        "carried": {"file": os.path.relpath(args.carried, os.getcwd()),
                    "bytes": os.path.getsize(args.carried) if os.path.isfile(args.carried)
                    else None},
        "files": sorted(os.listdir(args.out)) + ["summary.json"],
    }
    tmp = os.path.join(args.out, "summary.json.tmp")
    with open(tmp, "w") as f:
        json.dump(summary, f, indent=2)
        f.write("\n")
    os.replace(tmp, os.path.join(args.out, "summary.json"))
    if not final:
        return 0

    print("# device check (%s): %s in %.0f s%s" % (
        summary["mode"], "PASSED" if summary["passed"] else "FAILED", args.wall_s,
        "" if not unfinished else "; stopped by %s before %s" % (
            args.stopped or "an error", ", ".join(unfinished))))
    for s in steps:
        print("#   %-16s %-8s %5s s%s" % (s["name"], s["status"], s["seconds"],
                                          "  (" + s["reason"] + ")" if "reason" in s else ""))
    for k, v in summary["tests"].items():
        if v:
            print("#   %s: %s" % (k, v))
    for name, r in runs.items():
        print("#   %s: verification %s (%s wrong of %s, max rel err %.3g), %.4g TFLOP/s/GPU" % (
            name, "passed" if r["verification_passed"] else "FAILED", r["mismatches"],
            r["compared"], r["max_rel_error"] or 0.0, r["tflops_per_gpu"] or 0.0))
    for name, b in (("bench", bench), ("bench-fp8", bench_fp8)):
        print_bench(name, b)
    return 0 if summary["passed"] else 1


def print_bench(name, bench):
    if bench and "error" not in bench:
        print("#   %s on %s (%s): dense %.4g TFLOP/s, expert GEMMs %.4g TFLOP/s = %.3f of dense"
              % (name, bench["device"] or "cpu", bench["precision"], bench["dense_gemm_tflops"],
                 bench["expert_gemm_tflops"], bench["expert_gemm_ratio_to_dense"]))
        for impl, a in (bench.get("core_attention") or {}).items():
            print("#   %s core attention (%s): forward %.3f ms, forward+backward %.3f ms, %.4g "
                  "TFLOP/s" % (name, impl, a["forward_ms"], a["forward_backward_ms"], a["tflops"]))
        for impl, why in (bench.get("core_attention_unavailable") or {}).items():
            print("#   %s core attention (%s): not run: %s" % (name, impl, why))
        for s in bench["layer_stacks"]:
            frac = s["fraction_of_peak"]
            print("#   bench %d layer(s): step %.3f ms, %.4g TFLOP/s%s" % (
                s["layers"], s["step_time_median_s"] * 1e3, s["tflops"],
                " = %.1f%% of %s TFLOP/s peak" % (100 * frac, bench["peak_tflops"])
                if frac is not None else ""))
        if bench.get("dense_gemm_fp8_tflops"):
            print("#   %s: dense fp8 %.4g TFLOP/s = %.2fx bf16; step speed-up over bf16 %s" % (
                name, bench["dense_gemm_fp8_tflops"], bench["dense_gemm_fp8_over_bf16"],
                bench.get("step_speedup_over_bf16")))
    elif bench:
        print("#   %s: %s" % (name, bench["error"]))


if __name__ == "__main__":
    sys.exit(main())
