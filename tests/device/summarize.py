"""Writes the device check's one JSON summary (summary.json) from what tests/device/check.sh left:
its steps table, check.log, the run reports and the probe's bench.json; archives those reports
into results.tar.gz; prints a short table and exits 0 only when every step passed. Standard
library only (it runs on the GPU machine).

The device call returns at most 8 files of at most 16 MiB from the output folder, and which are
dropped beyond that is not ours to choose: the folder holds summary.json, check.log and
results.tar.gz only, check.log is cut in the middle past CHECK_LOG_MAX_BYTES, and the archive
drops the step logs before it would outgrow ARCHIVE_MAX_BYTES.
"""

import argparse
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile

# The performance targets on one H200 (benchmarks, not pass/fail criteria of the check).
EXPERT_GEMM_TARGET_RATIO = 0.85
STEP_TARGET_FRACTION_OF_PEAK = 0.45

# What the device call returns (the device tool's README, Limits).
DEVICE_MAX_FILES = 8
DEVICE_MAX_FILE_BYTES = 16 << 20
# Kept well under the per-file limit: check.log keeps its first CHECK_LOG_HEAD_BYTES and its last
# bytes up to the total.
CHECK_LOG_MAX_BYTES = 12 << 20
CHECK_LOG_HEAD_BYTES = 2 << 20
ARCHIVE_MAX_BYTES = 12 << 20
# The run reports check.sh writes (results/NAME.json), in the order it runs them.
RUNS = ("run-1gpu", "run-1gpu-fp8-blockwise", "run-1gpu-fp8", "run-4rank", "run-1gpu-nccl",
        "run-4rank-pp")


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
    """The machine's and the build's versions, each looked up once per check (cached in
    WORK/versions.json): the tools at the first summary, moebench's own once it is built, the
    carried MANIFEST once unpacked."""
    cache = os.path.join(args.work, "versions.json")
    v = load_json(cache) or {}
    if "gpus" not in v:
        smi = command_output(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,"
                              "pci.bus_id", "--format=csv,noheader"])
        v["gpus"] = smi.splitlines() if smi else None
        nvcc = (command_output(["nvcc", "--version"]) or
                command_output(["/usr/local/cuda/bin/nvcc", "--version"]))
        v["nvcc"] = last_line_matching(r"release", nvcc) if nvcc else None
        cmake = command_output(["cmake", "--version"])
        v["cmake"] = cmake.splitlines()[0] if cmake else None
        cxx = command_output(["c++", "--version"])
        v["cxx"] = cxx.splitlines()[0] if cxx else None
        v["python"] = sys.version.split()[0]
        from importlib import metadata
        for dist in ("torch", "nvidia-nccl-cu13", "nvidia-cublas", "nvidia-cudnn-cu13"):
            try:
                v[dist] = metadata.version(dist)
            except metadata.PackageNotFoundError:
                v[dist] = None
    if not v.get("openmpi"):
        mpirun = os.path.join(deps, "openmpi", "bin", "mpirun")
        ompi = command_output([mpirun if os.path.isfile(mpirun) else "mpirun", "--version"])
        v["openmpi"] = ompi.splitlines()[0] if ompi else None
    if not v.get("moebench"):
        v["moebench"] = command_output([os.path.join(args.build, "moebench"), "version"])
    manifest = os.path.join(deps, "MANIFEST")
    if "carried" not in v and os.path.isfile(manifest):
        with open(manifest) as f:
            v["carried"] = [line.strip() for line in f if line.strip()]
    with open(cache, "w") as f:
        json.dump(v, f)
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
        # Which kernels ran and how often each fell back (meta.kernels.calls on a device).
        "kernels": doc.get("meta", {}).get("kernels"),
        # The memory model against the GPU: the step's tensors estimated and measured, and what
        # the context, cuBLAS, cuDNN and NCCL took before the step (plan's reserve is a guess
        # until this says).
        "memory": {k: doc.get("memory", {}).get(k)
                   for k in ("estimate_bytes", "measured_peak_bytes", "measured_over_estimate",
                             "device_baseline_bytes", "resident_baseline_bytes")},
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
        # The GEMM without the quantisation of its operands (bench_report.cpp's split).
        "dense_gemm_fp8_quantisation_s": (res.get("dense_gemm_fp8") or {}).get("quantisation_s"),
        "dense_gemm_fp8_gemm_only_tflops":
            (res.get("dense_gemm_fp8") or {}).get("gemm_only_tflops"),
        "dense_gemm_fp8_gemm_only_over_bf16":
            (res.get("dense_gemm_fp8") or {}).get("gemm_only_over_dense"),
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


def read_steps(path):
    """check.sh's steps table: name, status, exit code, seconds, limit, reason (skipped)."""
    steps = []
    with open(path) as f:
        for line in f:
            fields = line.rstrip("\n").split("\t")
            if len(fields) < 4:
                continue
            s = {"name": fields[0], "status": fields[1],
                 "exit_code": int(fields[2]) if fields[2] else None, "seconds": int(fields[3])}
            if len(fields) > 4 and fields[4]:
                s["limit_s"] = int(fields[4])
            if len(fields) > 5 and fields[5]:
                s["reason"] = fields[5]
            steps.append(s)
    return steps


def replace_atomically(out, name, write):
    """write(path) into a temporary name in `out`, then renamed over `name`."""
    tmp = os.path.join(out, "." + name + ".tmp")
    write(tmp)
    os.replace(tmp, os.path.join(out, name))


def archive_results(results, out):
    """results.tar.gz of the reports in `results` (the runs' step logs dropped first if the
    archive would outgrow ARCHIVE_MAX_BYTES); what it holds and what it left out."""
    names = sorted(os.listdir(results)) if os.path.isdir(results) else []
    left_out = []
    for attempt in ("all", "reports only"):
        kept = [n for n in names if attempt == "all" or n.endswith(".json")]

        def write(tmp):
            with tarfile.open(tmp, "w:gz") as tar:
                for n in kept:
                    tar.add(os.path.join(results, n), arcname="results/" + n)
        replace_atomically(out, "results.tar.gz", write)
        if os.path.getsize(os.path.join(out, "results.tar.gz")) <= ARCHIVE_MAX_BYTES:
            left_out = [n for n in names if n not in kept]
            return {"file": "results.tar.gz", "holds": kept, "left_out": left_out}
    return {"file": "results.tar.gz", "holds": kept,
            "left_out": [n for n in names if n not in kept],
            "over_limit": True}


def cap_log(path):
    """Cuts check.log in the middle once it exceeds CHECK_LOG_MAX_BYTES; the bytes cut."""
    size = os.path.getsize(path) if os.path.isfile(path) else 0
    if size <= CHECK_LOG_MAX_BYTES:
        return 0
    tail = CHECK_LOG_MAX_BYTES - CHECK_LOG_HEAD_BYTES
    with open(path, "rb") as f:
        head = f.read(CHECK_LOG_HEAD_BYTES)
        f.seek(size - tail)
        end = f.read()
    cut = size - len(head) - len(end)
    with open(path, "wb") as f:
        f.write(head)
        f.write(b"\n# summarize.py: %d bytes cut here to keep check.log under %d MiB\n" % (
            cut, CHECK_LOG_MAX_BYTES >> 20))
        f.write(end)
    return cut


def out_files(out, summary_bytes):
    """What the device call would bring back, summary.json counted at `summary_bytes`."""
    files = {n: os.path.getsize(os.path.join(out, n)) for n in sorted(os.listdir(out))
             if n != "summary.json" and os.path.isfile(os.path.join(out, n))}
    files["summary.json"] = summary_bytes
    return {"files": [{"name": n, "bytes": b} for n, b in sorted(files.items())],
            "within_device_limits": (len(files) <= DEVICE_MAX_FILES and
                                     max(files.values()) <= DEVICE_MAX_FILE_BYTES)}


# What the loader says when cuDNN's graph or engine libraries, or NVRTC's builtins, do not
# resolve (cuDNN's own words, cudnn-frontend's, glibc's).
LOAD_ERRORS = ("Unable to load", "Invalid handle. Cannot load symbol",
               "cannot open shared object file", "libnvrtc-builtins")


def cudnn_state(path, work, log_path, runs):
    """check.sh's cuDNN state: asked for and built, or off and why; the folders check.sh put on
    the loader's path; which cuDNN and NVRTC libraries were loaded (a run report's
    meta.loaded_libraries, else the cudnn_graphs step's line in check.log); whether the graph and
    engine libraries resolved; and the loader's complaint where they did not."""
    text = open(path).read().strip() if os.path.isfile(path) else "unknown"
    state = {"built": text == "on", "why_not": None if text == "on" else
             text.split(":", 1)[-1].strip()}
    loader = os.path.join(work, "loader_path.txt")
    state["loader_path"] = (open(loader).read().strip() or None) if os.path.isfile(loader) \
        else None
    loaded, source = None, None
    for name, doc in runs:
        meta = (doc or {}).get("meta", {})
        libs = meta.get("loaded_libraries")
        if libs is not None and meta.get("backend") == "cuda":  # the cpu backend loads no cuDNN
            loaded = [l for l in libs if "/libcudnn" in l or "/libnvrtc" in l]
            source = "results/%s.json meta.loaded_libraries" % name
            break
    load_error = None
    if os.path.isfile(log_path):
        with open(log_path, errors="replace") as f:
            for line in f:
                if loaded is None and "cudnn libraries loaded:" in line:
                    listed = line.split("cudnn libraries loaded:", 1)[1].strip()
                    loaded = [l.strip() for l in listed.split(",") if l.strip()]
                    source = "check.log (cudnn_graphs)"
                if load_error is None and any(e in line for e in LOAD_ERRORS):
                    load_error = line.strip()[:400]
    state["loaded"] = loaded
    state["loaded_from"] = source
    # The graph library loads at the first graph, the engines at the first execution: a GPU run
    # shows both; the host-only validation (the dry run) only the graph.
    state["graph_resolved"] = None if loaded is None else any("libcudnn_graph" in l
                                                              for l in loaded)
    state["engines_resolved"] = None if loaded is None or not source.startswith("results/") \
        else any("libcudnn_engines" in l for l in loaded)
    state["load_error"] = load_error
    return state


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", required=True)
    p.add_argument("--steps", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--results", required=True, help="the folder of run and bench reports")
    p.add_argument("--build", required=True)
    p.add_argument("--carried", required=True)
    p.add_argument("--cpu-only", default="0")
    p.add_argument("--prebuilt", default="", help="the prebuilt build folder, if one was used")
    p.add_argument("--cudnn", default="", help="check.sh's cuDNN state file")
    p.add_argument("--wall-s", type=float, default=0)
    p.add_argument("--planned", default="", help="every step the run means to take, a,b,c")
    p.add_argument("--deadline-s", type=float, default=None)
    p.add_argument("--stopped", default="", help="why the check ended early, if it did")
    p.add_argument("--final", default="1", help="0: written after a step, more to come")
    args = p.parse_args()
    final = args.final == "1"
    deps = os.path.join(args.work, "deps")

    steps = read_steps(args.steps)
    log_path = os.path.join(args.out, "check.log")
    log_cut = cap_log(log_path)
    log_text = open(log_path, errors="replace").read() if os.path.isfile(log_path) else ""

    runs = {}
    for name in RUNS:
        summary = run_summary(load_json(os.path.join(args.results, name + ".json")))
        if summary is not None:
            runs[name] = summary
    benches = {}
    for name in ("bench", "bench-fp8"):
        try:
            benches[name] = bench_summary(load_json(os.path.join(args.results, name + ".json")))
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
    mode = "cpu-only dry run (CHECK_SH_CPU_ONLY=1)" if args.cpu_only == "1" else "gpu"
    if args.prebuilt:
        mode += ", prebuilt build folder (CHECK_SH_PREBUILT)"
    summary = {
        "kind": "moebench.device_check",
        "schema_version": 2,
        "mode": mode,
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
        "cudnn": cudnn_state(args.cudnn, args.work, log_path,
                             [(n, load_json(os.path.join(args.results, n + ".json")))
                              for n in RUNS]),
        "tests": test_counts(log_text),
        "runs": runs,
        "bench": bench,
        "bench_fp8": bench_fp8,
        "versions": versions(args, deps),
        "carried": {"file": os.path.relpath(args.carried, os.getcwd()),
                    "bytes": os.path.getsize(args.carried) if os.path.isfile(args.carried)
                    else None},
        "results": archive_results(args.results, args.out),
        "check_log_bytes_cut": log_cut,
    }
    # The files as the device call will find them, this summary's own size included (twice
    # over: the figure's digits do not change it by more than a few bytes).
    text = json.dumps(summary, indent=2)
    summary.update(out_files(args.out, len(text) + 256))
    text = json.dumps(summary, indent=2) + "\n"

    def write(tmp):
        with open(tmp, "w") as f:
            f.write(text)
    replace_atomically(args.out, "summary.json", write)
    if not final:
        return 0

    print("# device check (%s): %s in %.0f s%s" % (
        summary["mode"], "PASSED" if summary["passed"] else "FAILED", args.wall_s,
        "" if not unfinished else "; stopped by %s before %s" % (
            args.stopped or "an error", ", ".join(unfinished))))
    for s in steps:
        print("#   %-24s %-8s %5s s%s%s" % (
            s["name"], s["status"], s["seconds"],
            " of %d" % s["limit_s"] if "limit_s" in s else "",
            "  (" + s["reason"] + ")" if "reason" in s else ""))
    if not summary["cudnn"]["built"]:
        print("#   cuDNN: %s" % summary["cudnn"]["why_not"])
    elif (summary["cudnn"]["engines_resolved"] is False or
          summary["cudnn"]["graph_resolved"] is False or summary["cudnn"]["load_error"]):
        print("#   cuDNN's libraries did not all load: %s" % (
            summary["cudnn"]["load_error"] or summary["cudnn"]["loaded"]))
    for k, v in summary["tests"].items():
        if v:
            print("#   %s: %s" % (k, v))
    for name, r in runs.items():
        print("#   %s: verification %s (%s wrong of %s, max rel err %.3g), %.4g TFLOP/s/GPU" % (
            name, "passed" if r["verification_passed"] else "FAILED", r["mismatches"],
            r["compared"], r["max_rel_error"] or 0.0, r["tflops_per_gpu"] or 0.0))
        calls = (r.get("kernels") or {}).get("calls")
        if calls:
            print("#     kernels: attention cudnn %d / gemm %d (%d refused), gemm fallbacks %d, "
                  "grouped %d (%d looped), fp8 %d (%d fell back)" % (
                      calls["attention_cudnn"], calls["attention_gemm"],
                      calls["attention_cudnn_refused"], calls["gemm_fallbacks"],
                      calls["grouped_calls"], calls["grouped_loop_problems"],
                      calls["fp8_gemms"], calls["fp8_fallbacks"]))
        mem = r.get("memory") or {}
        if mem.get("measured_peak_bytes") is not None:
            print("#     memory: step tensors %.1f MiB measured, %.1f estimated (%.3f); the "
                  "context and libraries took %s before the step" % (
                      mem["measured_peak_bytes"] / 2**20, mem["estimate_bytes"] / 2**20,
                      mem["measured_over_estimate"] or 0.0,
                      "%.2f GiB" % (mem["device_baseline_bytes"] / 2**30)
                      if mem.get("device_baseline_bytes") is not None else "unknown"))
    for name, b in (("bench", bench), ("bench-fp8", bench_fp8)):
        print_bench(name, b)
    print("#   files: %s (%s the device call's limits)" % (
        ", ".join("%s %d B" % (f["name"], f["bytes"]) for f in summary["files"]),
        "within" if summary["within_device_limits"] else "BEYOND"))
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
            print("#   %s: dense fp8 %.4g TFLOP/s = %.2fx bf16 (the GEMM alone %s); step speed-up "
                  "over bf16 %s" % (
                      name, bench["dense_gemm_fp8_tflops"], bench["dense_gemm_fp8_over_bf16"],
                      "%.2fx" % bench["dense_gemm_fp8_gemm_only_over_bf16"]
                      if bench.get("dense_gemm_fp8_gemm_only_over_bf16") else "-",
                      bench.get("step_speedup_over_bf16")))
    elif bench:
        print("#   %s: %s" % (name, bench["error"]))


if __name__ == "__main__":
    sys.exit(main())
