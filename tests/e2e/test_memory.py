"""The memory model against what the step really allocates, and --recompute, end to end.

Every run's report carries memory.estimate_bytes (the model of the step's tensors, per pipeline
rank) beside memory.measured_peak_bytes (the peak of the bytes the step's tensors took on the
ranks of that pipeline rank). They must agree within 10% on a dense and a MoE stack, pp 2 with
vp 2, with and without recompute, with FP8 (emulated), its saved inputs on and off, and with
ZeRO-1. With --recompute of every
module moebench implements, the run still verifies against the single-process reference, reports
the recompute's FLOPs (checked here against the model's shapes, computed independently) and
the activation bytes it saved.
"""

import os
import tempfile

import moebench_e2e as e2e

PRESET = "deepseek-v3-tiny"
USAGE = 2
# The bound. The model counts every tensor the step allocates, so the runs below agree
# to a few hundred bytes of tens of MB; routing imbalance (--routing router) is what the model
# does not know in advance (it takes balanced routing) and stays under 10% at these shapes.
MEMORY_REL_TOL = 0.10
REL_TOL = 1e-9  # FLOPs recomputed from the report's own integers
ALL_MODULES = "core_attn,layernorm,mla_up_proj,mlp,moe_act,shared_experts"


def run(ctx, tmp, np, args, name="r.json", expect_rc=0):
    out = os.path.join(tmp, name)
    full = ["run", "--preset", PRESET, "--warmup", 1, "--steps", 2, "--quiet", "--out", out]
    r = e2e.run_moebench(ctx, full + list(args), np=np, timeout=300)
    e2e.check(not r.timed_out and r.rc == expect_rc,
              "expected exit %d, got %s" % (expect_rc, r.rc), r)
    print("  np %d %s: %.1f s" % (np, " ".join(str(a) for a in args), r.wall_s))
    return r, (e2e.load_report(ctx, out) if expect_rc == 0 else None)


def check_memory(rep, pp):
    m = rep["memory"]
    per = m["per_pipeline_rank"]
    e2e.check(len(per) == pp, "%d pipeline ranks in memory.per_pipeline_rank" % len(per))
    for p in per:
        est, got = p["estimate_bytes"], p["measured_peak_bytes"]
        e2e.check(est > 0 and got > 0, "pipeline rank %d: estimate %r, measured %r" %
                  (p["pp_rank"], est, got))
        ratio = got / est
        print("    pp rank %d: estimate %.0f B, measured peak %.0f B (%.4f)" %
              (p["pp_rank"], est, got, ratio))
        e2e.check(abs(ratio - 1) <= MEMORY_REL_TOL,
                  "pipeline rank %d: measured %r against estimate %r (%.3f), beyond %g" %
                  (p["pp_rank"], got, est, ratio, MEMORY_REL_TOL))
    e2e.check(m["estimate_bytes"] == max(p["estimate_bytes"] for p in per), "estimate_bytes")
    e2e.check(m["measured_peak_bytes"] == max(p["measured_peak_bytes"] for p in per),
              "measured_peak_bytes")
    # The process's own (libraries, MPI): counted, and more than nothing.
    e2e.check(m["resident_baseline_bytes"] > 0, "resident baseline %r" %
              m["resident_baseline_bytes"])
    e2e.check(m["resident_peak_bytes"] >= m["resident_baseline_bytes"], "resident peak")
    return m


def recompute_flops_per_token(model, seq, modules, dense):
    """The forward FLOPs the recompute repeats per token of one layer, from the model's shapes."""
    h, heads = model["hidden_size"], model["num_attention_heads"]
    qk = model["qk_nope_head_dim"] + model["qk_rope_head_dim"]
    f = 0.0
    if "mla_up_proj" in modules:
        q_in = model["q_lora_rank"] or h
        f += 2 * q_in * heads * qk
        f += 2 * model["kv_lora_rank"] * heads * (model["qk_nope_head_dim"] + model["v_head_dim"])
    if "core_attn" in modules:  # QK^T and AV over the causal half, forward only
        f += 2 * seq * heads * (qk + model["v_head_dim"]) * 0.5
    if dense and "mlp" in modules:
        f += 2 * h * 2 * model["intermediate_size"]
    if not dense and "shared_experts" in modules:
        f += 2 * h * 2 * model["n_shared_experts"] * model["moe_intermediate_size"]
    return f


def test_dense_stack(ctx):
    with tempfile.TemporaryDirectory() as tmp:
        _, rep = run(ctx, tmp, 2, ["--layers", 2, "--dense-layers", 2, "--head", "off"])
        check_memory(rep, 1)


def test_moe_stack(ctx):
    with tempfile.TemporaryDirectory() as tmp:
        _, rep = run(ctx, tmp, 4, ["--layers", 2, "--dense-layers", 0, "--ep", 4])
        check_memory(rep, 1)
        # Imbalanced routing: the model takes balanced routing; the step grows with the busiest
        # expert rank.
        _, rep = run(ctx, tmp, 4, ["--layers", 2, "--dense-layers", 0, "--ep", 4,
                                   "--routing", "router"], name="router.json")
        check_memory(rep, 1)


def test_pipelined_with_and_without_recompute(ctx):
    layout = ["--ep", 2, "--pp", 2, "--vp", 2, "--global-batch", 8, "--verify"]
    with tempfile.TemporaryDirectory() as tmp:
        _, plain = run(ctx, tmp, 4, layout, name="plain.json")
        m0 = check_memory(plain, 2)
        e2e.check(m0["recompute"] == [] and m0["recompute_flops"] == 0, "no recompute: %r" %
                  {k: m0[k] for k in ("recompute", "recompute_flops")})
        e2e.check(m0["activation_bytes_saved"] == 0, "saved %r" % m0["activation_bytes_saved"])

        _, rep = run(ctx, tmp, 4, layout + ["--recompute", ALL_MODULES], name="recompute.json")
        m = check_memory(rep, 2)
        v = rep["verification"]
        e2e.check(v["passed"] and v["mismatches"] == 0 and v["compared"] > 0,
                  "verification with every module recomputed: %r" %
                  {k: v[k] for k in ("passed", "mismatches", "compared")})
        e2e.check(m["recompute"] == ALL_MODULES.split(","), "recompute %r" % m["recompute"])
        e2e.check(rep["config"]["workload"]["recompute"] == m["recompute"], "workload.recompute")
        # The recompute FLOPs, from the shapes: 1 dense and 3 MoE layers plus the MTP layer (MoE).
        model, wl = rep["config"]["model"], rep["config"]["workload"]
        seq, layers, dense = wl["seq_len"], wl["layers"] + wl["mtp_layers"], wl["dense_layers"]
        modules = m["recompute"]
        per_token = (dense * recompute_flops_per_token(model, seq, modules, True) +
                     (layers - dense) * recompute_flops_per_token(model, seq, modules, False))
        inst = rep["accounting"]["instantiated"]
        e2e.check_close(inst["recompute_flops_per_token"], per_token, REL_TOL,
                        "recompute FLOPs per token")
        e2e.check_close(m["recompute_flops"], per_token * inst["tokens_per_step"], REL_TOL,
                        "recompute FLOPs per step")
        # Not in Megatron's count: the same FLOPs per token as without recompute.
        e2e.check(inst["flops_per_token"] ==
                  plain["accounting"]["instantiated"]["flops_per_token"],
                  "recompute changed the Megatron FLOPs")
        e2e.check(m["activation_bytes_saved"] > 0 and
                  m["activation_bytes"] + m["activation_bytes_saved"] == m0["activation_bytes"],
                  "activation bytes %r saved %r, without recompute %r" %
                  (m["activation_bytes"], m["activation_bytes_saved"], m0["activation_bytes"]))
        e2e.check(m["measured_peak_bytes"] < m0["measured_peak_bytes"],
                  "recompute did not lower the measured peak: %r against %r" %
                  (m["measured_peak_bytes"], m0["measured_peak_bytes"]))


def test_fp8_and_zero1(ctx):
    with tempfile.TemporaryDirectory() as tmp:
        _, rep = run(ctx, tmp, 4, ["--layers", 4, "--ep", 2, "--pp", 2, "--global-batch", 4,
                                   "--precision", "fp8", "--recompute", "mla_up_proj,moe_act"])
        check_memory(rep, 2)
        e2e.check(rep["config"]["fp8"]["weight_copies"] == "kept", "auto with room: kept")
        # Weights quantised at every GEMM: the same step, verified; said in the report.
        _, rep = run(ctx, tmp, 4, ["--layers", 4, "--ep", 2, "--pp", 2, "--global-batch", 4,
                                   "--precision", "fp8", "--fp8-weight-copies", "per-gemm",
                                   "--verify"], name="per-gemm.json")
        check_memory(rep, 2)
        e2e.check(rep["config"]["fp8"]["weight_copies"] == "per-gemm", "per-gemm as given")
        e2e.check(rep["verification"]["passed"], "per-gemm copies did not verify")
        _, rep = run(ctx, tmp, 4, ["--layers", 4, "--ep", 2, "--pp", 2, "--vp", 2,
                                   "--global-batch", 8, "--grad-reduce", "reduce-scatter",
                                   "--head", "off"], name="zero1.json")
        check_memory(rep, 2)


def test_fp8_saved_inputs(ctx):
    """--fp8-saved-inputs (on by default under fp8): pp 2, vp 2, ep 2 verifies, the estimate
    holds, the report names it and what it saved, and the measured peak falls against off."""
    layout = ["--layers", 4, "--ep", 2, "--pp", 2, "--vp", 2, "--global-batch", 8,
              "--precision", "fp8", "--fp8-recipe", "mxfp8", "--verify"]
    with tempfile.TemporaryDirectory() as tmp:
        _, on = run(ctx, tmp, 4, layout, name="on.json")
        _, off = run(ctx, tmp, 4, layout + ["--fp8-saved-inputs", "off"], name="off.json")
        for rep, want in ((on, "fp8"), (off, "storage")):
            check_memory(rep, 2)
            e2e.check(rep["verification"]["passed"], "fp8 saved inputs %s did not verify" % want)
            e2e.check(rep["config"]["fp8"]["saved_inputs"] == want,
                      "config.fp8.saved_inputs %r, expected %r" %
                      (rep["config"]["fp8"]["saved_inputs"], want))
        m_on, m_off = on["memory"], off["memory"]
        e2e.check(m_on["activation_bytes_saved"] > 0 and m_off["activation_bytes_saved"] == 0,
                  "activation bytes saved: on %r, off %r" %
                  (m_on["activation_bytes_saved"], m_off["activation_bytes_saved"]))
        e2e.check(m_on["activation_bytes"] + m_on["activation_bytes_saved"] ==
                  m_off["activation_bytes"],
                  "on keeps %r and saves %r of off's %r" %
                  (m_on["activation_bytes"], m_on["activation_bytes_saved"],
                   m_off["activation_bytes"]))
        e2e.check(m_on["measured_peak_bytes"] < m_off["measured_peak_bytes"],
                  "FP8 saved inputs did not lower the measured peak: %r against %r" %
                  (m_on["measured_peak_bytes"], m_off["measured_peak_bytes"]))
        # The same step: the experts' weight gradients read the same quantised values either way.
        e2e.check(on["verification"]["max_abs_error"] == off["verification"]["max_abs_error"],
                  "the saved copies changed the verification's error: %r against %r" %
                  (on["verification"]["max_abs_error"], off["verification"]["max_abs_error"]))


def test_recompute_refused(ctx):
    with tempfile.TemporaryDirectory() as tmp:
        for bad, says in (("moe", "does not recompute a whole MoE layer"),
                          ("mla_up_proj,attn", "'attn' is not a module")):
            out = os.path.join(tmp, "r.json")
            r = e2e.run_moebench(ctx, ["run", "--preset", PRESET, "--recompute", bad,
                                       "--out", out], np=2)
            e2e.check(r.rc == USAGE and says in r.stderr and "valid:" in r.stderr,
                      "--recompute %s: exit %r" % (bad, r.rc), r)
            e2e.check(e2e.leftover_files(tmp) == [], "left %r" % e2e.leftover_files(tmp))


TESTS = [test_dense_stack, test_moe_stack, test_pipelined_with_and_without_recompute,
         test_fp8_and_zero1, test_fp8_saved_inputs, test_recompute_refused]

if __name__ == "__main__":
    e2e.run_main(TESTS)
