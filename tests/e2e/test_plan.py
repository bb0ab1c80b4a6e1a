"""`moebench plan` and `moebench presets`: DeepSeek-V3's published numbers, and configs that differ
from it by a known amount.

The FLOP formula is Megatron-Core's (megatron/training/training.py,
num_floating_point_operations); it is
recomputed here from the config file so the binary's accounting is checked against an
independent implementation, not against itself.
"""

import json
import math
import os
import tempfile

import moebench_e2e as e2e

# Sums of a few hundred exact integers in doubles, in a different order than the binary's:
# agreement to 1e-12 leaves room only for rounding.
REL_TOL = 1e-12


def plan(ctx, args):
    r = e2e.run_moebench(ctx, ["plan", "--json"] + list(args), timeout=60)
    e2e.check(r.rc == 0, "moebench plan failed", r)
    try:
        return json.loads(r.stdout)
    except ValueError:
        e2e.check(False, "plan --json did not print JSON", r)


def megatron_flops_per_token(cfg, seq):
    """Megatron-Core's num_floating_point_operations for the DeepSeek-V3 family (MLA, MoE, MTP)."""
    h, heads = cfg["hidden_size"], cfg["num_attention_heads"]
    nope, rope, v = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"]
    q_lora, kv_lora = cfg["q_lora_rank"], cfg["kv_lora_rank"]
    q_term = q_lora * (h + heads * (nope + rope) + 1) if q_lora else h * heads * (nope + rope)
    mla = 6 * (q_term + kv_lora * (h + heads * (nope + v) + 1) + h * rope + heads * v * h +
               seq * heads * (nope + rope) * 0.5 + seq * heads * v * 0.5)
    layers, dense, mtp = cfg["num_hidden_layers"], cfg["first_k_dense_replace"], cfg[
        "num_nextn_predict_layers"]
    moe = layers - dense
    dense_mlp = 6 * 3 * h * cfg["intermediate_size"]
    moe_mlp = 6 * 3 * h * cfg["moe_intermediate_size"] * (cfg["num_experts_per_tok"] +
                                                          cfg["n_shared_experts"])
    return ((layers + mtp) * mla + dense * dense_mlp + (moe + mtp) * moe_mlp +
            mtp * 6 * (3 * h + 2 * h * h) + 6 * h * cfg["vocab_size"] * (1 + mtp))


def load_config(ctx):
    with open(ctx.dsv3_config) as f:
        return json.load(f)


def full(p):
    return p["accounting"]["full_model"]


def test_preset_matches_published_numbers(ctx):
    a = full(plan(ctx, ["--preset", "deepseek-v3"]))
    e2e.check(round(a["total_params"] / 1e9, 1) == 671.0,
              "total_params %d does not round to 671.0e9" % a["total_params"])
    # NVIDIA's row: 1648 TFLOP/s/GPU <-> 6338 tokens/s/GPU (deepseek-v3.md).
    tokens = math.floor(1648e12 / a["flops_per_token"])
    e2e.check(tokens == 6338, "1648e12 / flops_per_token %r = %d tokens/s, expected 6338" %
              (a["flops_per_token"], tokens))
    e2e.check_close(a["flops_per_token"], megatron_flops_per_token(load_config(ctx), 4096),
                    REL_TOL, "flops_per_token vs the reference formula")


def test_model_config_file_matches_preset(ctx):
    by_preset = full(plan(ctx, ["--preset", "deepseek-v3"]))
    by_file = full(plan(ctx, ["--model-config", ctx.dsv3_config]))
    for key in ("total_params", "active_params", "flops_per_token", "flops_per_token_torchtitan"):
        e2e.check(by_file[key] == by_preset[key], "%s: config file gives %r, preset %r" %
                  (key, by_file[key], by_preset[key]))


def plan_modified(ctx, edit):
    cfg = load_config(ctx)
    edit(cfg)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "modified.json")
        with open(path, "w") as f:
            json.dump(cfg, f)
        return cfg, full(plan(ctx, ["--model-config", path]))


def check_delta(base, modified, key, want):
    got = modified[key] - base[key]
    e2e.check_close(got, want, REL_TOL, "change in %s" % key)


def test_direct_q_projection(ctx):
    """q_lora_rank null: each layer's q goes h -> heads x qk directly, not through the lora."""
    cfg = load_config(ctx)
    base = full(plan(ctx, ["--model-config", ctx.dsv3_config]))
    _, mod = plan_modified(ctx, lambda c: c.update(q_lora_rank=None))
    h, heads, q_lora = cfg["hidden_size"], cfg["num_attention_heads"], cfg["q_lora_rank"]
    qk = cfg["qk_nope_head_dim"] + cfg["qk_rope_head_dim"]
    layers, mtp = cfg["num_hidden_layers"], cfg["num_nextn_predict_layers"]
    # Parameters: q_a_proj (h x q_lora), q_a_layernorm (q_lora), q_b_proj (q_lora x heads x qk)
    # become q_proj (h x heads x qk), in each of the main model's layers (MTP is not in the total).
    params = layers * (h * heads * qk - (h * q_lora + q_lora + q_lora * heads * qk))
    # FLOPs: the formula's q term, in every layer including the MTP layer.
    flops = (layers + mtp) * 6 * (h * heads * qk - q_lora * (h + heads * qk + 1))
    check_delta(base, mod, "total_params", params)
    check_delta(base, mod, "active_params", params)
    check_delta(base, mod, "flops_per_token", flops)


def test_two_shared_experts(ctx):
    cfg = load_config(ctx)
    base = full(plan(ctx, ["--model-config", ctx.dsv3_config]))
    mod_cfg, mod = plan_modified(ctx, lambda c: c.update(n_shared_experts=2))
    h, ffn = cfg["hidden_size"], cfg["moe_intermediate_size"]
    moe = cfg["num_hidden_layers"] - cfg["first_k_dense_replace"]
    mtp = cfg["num_nextn_predict_layers"]
    # One more gate/up/down expert in each MoE layer, always active; the MTP layer is MoE too and
    # counts in the FLOPs but not in the main model's parameters.
    check_delta(base, mod, "total_params", moe * 3 * h * ffn)
    check_delta(base, mod, "active_params", moe * 3 * h * ffn)
    check_delta(base, mod, "flops_per_token", (moe + mtp) * 6 * 3 * h * ffn)
    e2e.check_close(mod["flops_per_token"], megatron_flops_per_token(mod_cfg, 4096), REL_TOL,
                    "modified flops_per_token vs the reference formula")


def test_presets_lists_both(ctx):
    r = e2e.run_moebench(ctx, ["presets"], timeout=60)
    e2e.check(r.rc == 0, "moebench presets failed", r)
    names = {l.split()[0] for l in r.stdout.splitlines() if l.strip() and not l.startswith("#")}
    for name in ("deepseek-v3", "deepseek-v3-tiny"):
        e2e.check(name in names, "presets does not list %s" % name, r)


def test_plan_out_writes_file(ctx):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "p.json")
        r = e2e.run_moebench(ctx, ["plan", "--preset", "deepseek-v3-tiny", "--json", "--out", out],
                             timeout=60)
        e2e.check(r.rc == 0, "plan --out failed", r)
        e2e.check(os.path.isfile(out), "plan --out wrote no file", r)
        with open(out) as f:
            written = json.load(f)
        e2e.check(written == json.loads(r.stdout), "the file differs from what --json printed", r)
        e2e.check(os.listdir(tmp) == ["p.json"], "plan left other files: %r" % os.listdir(tmp))

        text_out = os.path.join(tmp, "text.json")
        r = e2e.run_moebench(ctx, ["plan", "--preset", "deepseek-v3-tiny", "--out", text_out],
                             timeout=60)
        e2e.check(r.rc == 0 and os.path.isfile(text_out), "plan --out without --json", r)
        with open(text_out) as f:
            e2e.check(json.load(f) == written, "text-mode --out wrote a different plan")


def test_gpu_memory(ctx):
    """--gpu-memory: the largest rank's estimate (moebench's step, BF16) and the CUDA context's
    reserve must fit, else exit 2."""
    base = ["--preset", "deepseek-v3", "--world", "64", "--ep", "64", "--layers", "4"]
    p = plan(ctx, base)
    need = p["memory"]["moebench_max_rank_bytes"] + p["memory"]["context_reserve_bytes"]
    e2e.check(p["memory"]["context_reserve_bytes"] > 0, "no context reserve")
    gib = need / 2**30
    given = "%.3f" % (gib * 1.01)
    fits = plan(ctx, base + ["--gpu-memory", given])
    e2e.check(fits["memory"]["fits_given_gpu_memory"] is True, "%r" % fits["memory"])
    # The GiB given, as written on the command line (rounded to 3 decimals), in bytes.
    e2e.check_close(fits["memory"]["given_gpu_memory_bytes"], float(given) * 2**30, 1e-9,
                    "given_gpu_memory_bytes")
    r = e2e.run_moebench(ctx, ["plan"] + base + ["--gpu-memory", "%.3f" % (gib * 0.99)], timeout=60)
    e2e.check(r.rc == 2 and "at 64 GPUs the largest rank needs an estimated" in r.stderr and
              r.stderr.count("\n") == 1, "a plan that does not fit must be one line, exit 2", r)
    for bad in ["0", "-1", "nan", "1e9"]:
        r = e2e.run_moebench(ctx, ["plan"] + base + ["--gpu-memory", bad], timeout=60)
        e2e.check(r.rc == 2 and "--gpu-memory" in r.stderr, "--gpu-memory %s" % bad, r)


def test_plan_takes_run_flags(ctx):
    """A run's command line plans with `run` changed to `plan` (scaling.sh's pre-flight); the
    run's own flags are checked as run checks them."""
    run_flags = ["--steps", "20", "--warmup", "2", "--verify", "--timeout", "30", "--quiet",
                 "--inject", "delay:rank=1,seconds=1"]
    p = plan(ctx, ["--preset", "deepseek-v3-tiny", "--world", "2", "--ep", "2"] + run_flags)
    e2e.check(p["parallel"]["world"] == 2, "plan with run flags")
    for bad, expected in [(["--steps", "0"], "--steps"), (["--timeout", "0"], "--timeout"),
                          (["--inject", "hang:rank=5"], "no rank 5")]:
        r = e2e.run_moebench(ctx, ["plan", "--preset", "deepseek-v3-tiny", "--world", "2"] + bad,
                             timeout=60)
        e2e.check(r.rc == 2 and expected in r.stderr, "plan %s" % " ".join(bad), r)


def test_verify_cost(ctx):
    """plan --verify says what the reference costs and what a rank receives; for the device
    check's pipeline run (tests/device/deepseek-v3-device.json, 4 ranks, pp 2) each rank receives
    a fraction of the reference, whose 2.8 G expert gradients no single MPI message holds."""
    args = ["--backend", "cuda", "--verify", "--world", "4", "--model-config",
            os.path.join(ctx.repo, "tests", "device", "deepseek-v3-device.json"), "--seq-len",
            "512", "--layers", "4", "--dense-layers", "0", "--head", "off", "--pp", "2", "--vp",
            "2", "--ep", "2", "--global-batch", "8", "--optimizer", "none"]
    v = plan(ctx, args)["verification"]
    experts = 4 * 16 * (7168 * 4096 + 2048 * 7168)  # layers x experts x (gate/up + down)
    e2e.check(v["reference_results_host_bytes"] > 4 * experts,
              "the reference's results hold every expert gradient in FP32: %r" % v)
    e2e.check(v["max_rank_received_bytes"] < v["reference_results_host_bytes"] / 2 and
              v["reference_step_bytes"] > 0 and v["sent_bytes"] >= v["max_rank_received_bytes"],
              "a rank receives only its slices: %r" % v)
    r = e2e.run_moebench(ctx, ["plan"] + args, timeout=60)
    e2e.check(r.rc == 0 and "# --verify: the single-process reference on rank 0 needs" in
              r.stdout and "each rank receives at most" in r.stdout, "plan's --verify line", r)
    e2e.check("verification" not in plan(ctx, args[:2] + args[3:]), "no --verify, no cost")


TESTS = [
    test_verify_cost,
    test_gpu_memory,
    test_plan_takes_run_flags,
    test_preset_matches_published_numbers,
    test_model_config_file_matches_preset,
    test_direct_q_projection,
    test_two_shared_experts,
    test_presets_lists_both,
    test_plan_out_writes_file,
]

if __name__ == "__main__":
    e2e.run_main(TESTS)
