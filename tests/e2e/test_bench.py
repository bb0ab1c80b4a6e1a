"""`moebench bench --backend cpu`: the performance probe end to end with tiny sizes (the tiny
preset, one EP=4 rank of it: 4 local experts top-4, 128 tokens, 128 rows per expert). Checks the
JSON it writes against FLOP counts recomputed here from the model's shapes, the table it prints,
and its usage errors. Timings are only checked to be positive: this is no performance test.
"""

import json
import os
import tempfile

import moebench_e2e as e2e

# Sums of a few exact integers in doubles, in another order than the binary's: rounding only.
REL_TOL = 1e-12

TINY = ["--backend", "cpu", "--gemm-n", "96", "--warmup", "1", "--iterations", "2"]


def bench(ctx, args, timeout=60):
    """`moebench bench` with the tiny sizes, except for the flags `args` gives itself."""
    given = set(a for a in args if a.startswith("--"))
    base = []
    for i in range(0, len(TINY), 2):
        if TINY[i] not in given:
            base += TINY[i:i + 2]
    return e2e.run_moebench(ctx, ["bench"] + base + list(args), timeout=timeout)


def moe_layer_flops_per_token(m, seq):
    """Megatron-Core's count for one MoE layer with attention (num_floating_point_operations):
    6 x the layer's multiply-adds per token, causal attention halved, the router not counted."""
    h, heads = m["hidden_size"], m["num_attention_heads"]
    nope, rope, v = m["qk_nope_head_dim"], m["qk_rope_head_dim"], m["v_head_dim"]
    q_lora, kv_lora = m["q_lora_rank"], m["kv_lora_rank"]
    q_term = q_lora * (h + heads * (nope + rope) + 1) if q_lora else h * heads * (nope + rope)
    mla = 6 * (q_term + kv_lora * (h + heads * (nope + v) + 1) + h * rope + heads * v * h +
               seq * heads * (nope + rope) * 0.5 + seq * heads * v * 0.5)
    experts = 6 * 3 * h * m["moe_intermediate_size"] * (
        m["num_experts_per_tok"] + m["n_shared_experts"])
    return mla + experts


def test_writes_the_figures(ctx):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "bench.json")
        r = bench(ctx, ["--layers", "1,2", "--out", out])
        e2e.check(r.rc == 0, "bench failed", r)
        e2e.check(os.listdir(tmp) == ["bench.json"], "left other files: %r" % os.listdir(tmp))
        with open(out) as f:
            doc = json.load(f)

    e2e.check(doc["kind"] == "moebench.bench" and doc["schema_version"] == 1, "kind/version")
    meta = doc["meta"]
    e2e.check(meta["backend"] == "cpu" and meta["precision"] == "fp32", "backend: %r" % meta)
    e2e.check(meta["device"] is None, "the cpu backend has no device record")
    e2e.check(meta["argv"][1] == "bench" and meta["git_sha"], "argv and git sha")

    c = doc["config"]
    m = c["model"]
    e2e.check(m["name"] == "deepseek-v3-tiny", "the cpu backend's default model is the tiny preset")
    # Default EP = experts / top-k: 16 / 4 = 4 -> 4 local experts, each token to all of them.
    e2e.check((c["ep"], c["local_experts"], c["top_k"], c["tokens"], c["rows_per_expert"]) ==
              (4, 4, 4, 128, 128), "the emulated rank: %r" % c)
    e2e.check(c["gemm_n"] == 96 and c["iterations"] == 2 and c["warmup"] == 1, "sizes: %r" % c)

    e2e.check(doc["peak"]["tflops"] is None and "--peak-tflops" in doc["peak"]["source"],
              "no known peak for the cpu: %r" % doc["peak"])
    res = doc["results"]

    dense = res["dense_gemm"]
    e2e.check_close(dense["flops"], 2 * 96 ** 3, REL_TOL, "dense GEMM FLOPs")
    e2e.check(dense["time_s"]["count"] == 2 and dense["time_s"]["median"] > 0, "dense timing")
    e2e.check_close(dense["tflops"], dense["flops"] / dense["time_s"]["median"] / 1e12, 1e-9,
                    "dense TFLOP/s = FLOPs / median")
    e2e.check(dense["events_time_s"] is None and dense["fraction_of_peak"] is None, "cpu: no events")

    ex = res["expert_gemms"]
    h, f = m["hidden_size"], m["moe_intermediate_size"]
    names = [g["name"] for g in ex["cases"]]
    e2e.check(names == ["forward_up", "forward_down", "dgrad_down", "wgrad_down", "dgrad_up",
                        "wgrad_up"], "the six grouped GEMMs: %r" % names)
    for g in ex["cases"]:
        e2e.check(g["count"] == 4 and g["time_s"]["count"] == 2 and g["time_s"]["median"] > 0,
                  "%s: count and timing" % g["name"])
        e2e.check_close(g["flops"], 2.0 * g["m"] * g["n"] * g["k"] * 4, REL_TOL, g["name"])
        e2e.check(sorted((g["m"], g["n"], g["k"])) in (sorted((128, 2 * f, h)),
                                                       sorted((128, h, f))),
                  "%s: shape %r is not an expert GEMM" % (g["name"], (g["m"], g["n"], g["k"])))
    # Forward, dgrad and wgrad of gate/up (h -> 2f) and down (f -> h): 18 r h f per expert.
    e2e.check_close(ex["flops"], 18.0 * 4 * 128 * h * f, REL_TOL, "expert GEMM FLOPs")
    e2e.check_close(ex["time_s"], sum(g["time_s"]["median"] for g in ex["cases"]), 1e-9,
                    "expert GEMM time = sum of the medians")
    e2e.check_close(ex["ratio_to_dense"], ex["tflops"] / dense["tflops"], 1e-9, "ratio")
    e2e.check(ex["target_ratio"] == 0.85 and ex["meets_target"] == (ex["ratio_to_dense"] >= 0.85),
              "target")

    # Core attention of one layer on the MLA operands: the gemm implementation only on the cpu
    # backend (cudnn is tried on a device), Megatron's causal count for one 128-token sequence.
    att = res["core_attention"]
    e2e.check([a["implementation"] for a in att["cases"]] == ["gemm"] and
              att["unavailable"] == [] and att["fastest"] == "gemm", "attention cases: %r" % att)
    a = att["cases"][0]
    e2e.check((a["batch"], a["seq_len"], a["heads"], a["qk_dim"], a["v_dim"]) ==
              (1, 128, m["num_attention_heads"], m["qk_nope_head_dim"] + m["qk_rope_head_dim"],
               m["v_head_dim"]), "attention shape: %r" % a)
    heads, qk, vd = a["heads"], a["qk_dim"], a["v_dim"]
    e2e.check_close(a["flops"], 6 * (128 * heads * qk * 0.5 + 128 * heads * vd * 0.5) * 128,
                    REL_TOL, "core attention FLOPs (forward + backward, causal)")
    fwd, both = a["forward_time_s"]["median"], a["time_s"]["median"]
    # Positive, not ordered: forward alone and forward + backward are timed in separate runs, so
    # on a loaded machine (ctest runs tests side by side) forward's median can exceed the other's.
    e2e.check(a["time_s"]["count"] == 2 and a["forward_time_s"]["count"] == 2 and fwd > 0 and
              both > 0, "forward and forward + backward timed twice each: %r" % a)
    e2e.check_close(a["tflops"], a["flops"] / both / 1e12, 1e-9, "attention TFLOP/s")
    e2e.check_close(a["forward_tflops"], a["flops"] / 3 / fwd / 1e12, 1e-9, "forward TFLOP/s")

    stacks = res["layer_stacks"]
    e2e.check([s["layers"] for s in stacks] == [1, 2], "one stack per --layers value")
    per_layer = moe_layer_flops_per_token(m, 128) * 128
    for s in stacks:
        e2e.check_close(s["flops_per_step"], s["layers"] * per_layer, REL_TOL,
                        "%d layers: Megatron FLOPs per step" % s["layers"])
        e2e.check(s["workload"]["dense_layers"] == 0 and s["workload"]["attention"],
                  "MoE layers with attention")
        st = s["step_time_s"]
        e2e.check(st["count"] == 2 and st["median"] > 0, "step timing: %r" % st)
        e2e.check_close(s["tflops"], s["flops_per_step"] / st["median"] / 1e12, 1e-9, "TFLOP/s")
        fb = s["forward_backward_time_s"]["median"]
        e2e.check(0 < fb <= st["median"], "forward+backward within the step")
        e2e.check_close(s["tokens_per_s"], 128 / st["median"], 1e-9, "tokens/s")
        e2e.check(s["fraction_of_peak"] is None, "no peak, no fraction")
        for phase in ("attention", "router", "permute", "experts", "shared_expert", "optimizer"):
            e2e.check(s["phases"][phase]["time_s"] > 0, "%d layers: phase %s has no time" %
                      (s["layers"], phase))
        e2e.check(s["phases"]["experts"]["tflops"] > 0, "experts' rate")


def test_prints_a_table(ctx):
    r = bench(ctx, ["--layers", "1", "--peak-tflops", "0.5"])
    e2e.check(r.rc == 0, "bench failed", r)
    for text in ("moebench bench: backend cpu", "one EP=4 rank: 4 local experts, top-4",
                 "dense GEMM 96^3", "forward_up", "wgrad_up", "all six", "where the time goes",
                 "peak: 0.5 TFLOP/s (--peak-tflops)", "experts", "core attention"):
        e2e.check(text in r.stdout, "the table lacks %r" % text, r)
    e2e.check("of peak" in r.stdout and "%" in r.stdout, "a fraction of the given peak", r)


def test_usage_errors(ctx):
    cases = [
        (["--layers", "0"], "--layers 0"),
        (["--layers", "4,2"], "--layers 4,2"),
        (["--ep", "8"], "valid: 1, 2, 4"),  # 16 experts / 8 = 2 local < top-4
        (["--precision", "bf16"], "--precision bf16 is not available with --backend cpu"),
        (["--gemm-n", "0"], "--gemm-n 0"),
        (["--backend", "tpu"], "unknown compute backend 'tpu'"),
        (["--out", "/nonexistent-dir/b.json"], "does not exist"),
        (["--preset", "deepseek-v3-tiny", "--model-config", "x.json"], "at most one of"),
    ]
    for args, message in cases:
        r = bench(ctx, args, timeout=30)
        e2e.check(r.rc == e2e.EXIT_USAGE, "%r: expected exit 2" % args, r)
        e2e.check(message in r.stderr, "%r: stderr lacks %r" % (args, message), r)
        e2e.check(len([l for l in r.messages if l.strip()]) == 1, "%r: one line on stderr" % args, r)
        e2e.check("dense GEMM" not in r.stdout, "%r: ran before failing" % args, r)


def cpu_fast_core():
    """The OpenBLAS core type for this CPU's extensions (blas_core.cpp's rule), "" for none."""
    with open("/proc/cpuinfo") as f:
        flags = next((l.split(":", 1)[1].split() for l in f if l.startswith("flags")), [])
    if all(x in flags for x in ("avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl")):
        return "SkylakeX"
    return "Haswell" if "avx2" in flags and "fma" in flags else ""


def bench_with_coretype(ctx, tmp, coretype):
    """bench with OPENBLAS_CORETYPE set to coretype (None: unset, whatever the caller's
    environment says); returns the result and the report's meta.blas_core."""
    saved = os.environ.pop("OPENBLAS_CORETYPE", None)
    if coretype is not None:
        os.environ["OPENBLAS_CORETYPE"] = coretype
    out = os.path.join(tmp, "core-%s.json" % coretype)
    try:
        r = bench(ctx, ["--layers", "1", "--out", out])
    finally:
        os.environ.pop("OPENBLAS_CORETYPE", None)
        if saved is not None:
            os.environ["OPENBLAS_CORETYPE"] = saved
    e2e.check(r.rc == 0, "bench with OPENBLAS_CORETYPE=%s failed" % coretype, r)
    with open(out) as f:
        return r, json.load(f)["meta"].get("blas_core")


def test_warns_of_generic_blas_kernels(ctx):
    """Three cases, each forced here whatever the CPU: left alone, moebench runs OpenBLAS's kernels
    for this CPU (re-executing itself with OPENBLAS_CORETYPE where OpenBLAS 0.3.21 falls back to
    its generic Prescott ones, as on CPUs it does not know) and does not warn; a known core type
    set by the user is kept, without a warning; Prescott set by the user is kept and named on
    stderr, where the CPU has better kernels. The report says which kernels ran and why."""
    fast = cpu_fast_core()
    with tempfile.TemporaryDirectory() as tmp:
        r, core = bench_with_coretype(ctx, tmp, None)
        e2e.check(core is not None and core["name"], "no meta.blas_core: %r" % core, r)
        e2e.check("generic" not in r.stderr and "Prescott" not in r.stderr,
                  "a warning of generic kernels without OPENBLAS_CORETYPE", r)
        if core["chosen_by"] == "moebench":  # OpenBLAS did not know this CPU
            e2e.check(core["name"] == fast and "generic" in core["reason"] and
                      "OPENBLAS_CORETYPE=" + fast in core["reason"], "meta.blas_core %r" % core)
        else:
            e2e.check(core["chosen_by"] == "openblas" and core["name"] != "Prescott",
                      "meta.blas_core %r" % core)
        if fast:
            r, core = bench_with_coretype(ctx, tmp, fast)
            e2e.check("warning" not in r.stderr, "a warning with the CPU's own kernels", r)
            e2e.check(core == {"name": fast, "chosen_by": "environment",
                               "reason": "OPENBLAS_CORETYPE=%s was set" % fast},
                      "meta.blas_core %r" % core)
        r, core = bench_with_coretype(ctx, tmp, "Prescott")
        e2e.check(core["name"] == "Prescott" and core["chosen_by"] == "environment",
                  "the user's core type is kept: %r" % core)
        if fast:  # the fallback costs only where the CPU has better kernels
            e2e.check("moebench: warning: OpenBLAS runs its Prescott kernels, as "
                      "OPENBLAS_CORETYPE=Prescott asks, on a CPU with" in r.stderr and
                      "set it to " + fast in r.stderr, "no warning of the generic kernels", r)


TESTS = [test_writes_the_figures, test_prints_a_table, test_usage_errors,
         test_warns_of_generic_blas_kernels]

if __name__ == "__main__":
    e2e.run_main(TESTS)
