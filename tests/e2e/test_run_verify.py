"""`moebench run --verify` under mpirun with the tiny preset: exit codes and the report's contents.

Every run is checked against the schema, against what was asked (layout, workload) and against
quantities recomputed here from the report's own config (throughput, dispatch bytes).
"""

import json
import os
import tempfile

import moebench_e2e as e2e

PRESET = "deepseek-v3-tiny"
SEQ_LEN = 128  # the tiny preset's default sequence length
FP32_BYTES = 4  # the cpu backend computes in fp32
WARMUP, STEPS = 1, 3
# The report holds doubles written with round-trip precision; the only difference between the
# recomputed and the reported throughput is the order of a few floating-point divisions.
REL_TOL = 1e-9

_plan_cache = {}


def preset_plan(ctx):
    """The preset's accounting as `moebench plan` reports it (the reference for full_model)."""
    if "plan" not in _plan_cache:
        r = e2e.run_moebench(ctx, ["plan", "--preset", PRESET, "--json"], timeout=60)
        e2e.check(r.rc == 0, "moebench plan failed", r)
        _plan_cache["plan"] = json.loads(r.stdout)
    return _plan_cache["plan"]


def run_tiny(ctx, tmp, np, ep, extra=(), verify=True, expect_rc=0, timeout=180):
    out = os.path.join(tmp, "r.json")
    args = ["run", "--preset", PRESET, "--ep", ep, "--out", out, "--warmup", WARMUP, "--steps",
            STEPS] + (["--verify"] if verify else []) + list(extra)
    r = e2e.run_moebench(ctx, args, np=np, timeout=timeout)
    e2e.check(not r.timed_out, "moebench run did not finish within %d s" % timeout, r)
    e2e.check(r.rc == expect_rc, "expected exit %d, got %s" % (expect_rc, r.rc), r)
    report = e2e.load_report(ctx, out)
    print("  np %d ep %d %s: %.1f s" % (np, ep, " ".join(str(a) for a in extra), r.wall_s))
    return r, report


def check_report(ctx, r, rep, np, ep, verify=True, micro_batch=1, balanced=True,
                 expect_pass=True):
    par = rep["parallel"]
    for key, want in (("world", np), ("ep", ep), ("edp", np // ep), ("dp", np)):
        e2e.check(par[key] == want, "parallel.%s is %r, asked for %r" % (key, par[key], want))

    cfg = rep["config"]
    wl = cfg["workload"]
    e2e.check(cfg["model"]["name"] == PRESET, "config.model.name is %r" % cfg["model"]["name"])
    e2e.check(cfg["verify"] == verify, "config.verify is %r" % cfg["verify"])
    e2e.check(cfg["warmup"] == WARMUP and cfg["steps"] == STEPS,
              "config warmup/steps are %r/%r" % (cfg["warmup"], cfg["steps"]))
    e2e.check(wl["seq_len"] == SEQ_LEN and wl["micro_batch"] == micro_batch,
              "workload seq_len/micro_batch are %r/%r" % (wl["seq_len"], wl["micro_batch"]))
    e2e.check(wl["tokens_per_rank"] == SEQ_LEN * micro_batch,
              "workload.tokens_per_rank is %r" % wl["tokens_per_rank"])

    plan = preset_plan(ctx)
    full = rep["accounting"]["full_model"]
    want_params = plan["accounting"]["full_model"]["total_params"]
    e2e.check(full["total_params"] == want_params, "full_model.total_params %r != plan's %r" %
              (full["total_params"], want_params))

    v = rep["verification"]
    e2e.check(v["enabled"] == verify, "verification.enabled is %r" % v["enabled"])
    if verify and expect_pass:
        e2e.check(v["passed"] is True and v["mismatches"] == 0 and v["compared"] > 0,
                  "verification: passed %r, mismatches %r, compared %r" %
                  (v["passed"], v["mismatches"], v["compared"]))

    res = rep["results"]
    median = res["step_time_s"]["median"]
    e2e.check(median > 0, "step_time_s.median is %r" % median)
    e2e.check(res["step_time_s"]["count"] == STEPS and len(res["step_times_s"]) == STEPS,
              "expected %d timed steps, report has %r" % (STEPS, res["step_times_s"]))
    e2e.check(res["tflops_per_gpu"] > 0, "tflops_per_gpu is %r" % res["tflops_per_gpu"])
    flops_step = rep["accounting"]["instantiated"]["flops_per_step"]
    e2e.check_close(res["tflops_per_gpu"], flops_step / np / median / 1e12, REL_TOL,
                    "tflops_per_gpu vs instantiated.flops_per_step / world / median / 1e12")
    e2e.check_close(res["tokens_per_s_per_gpu"], SEQ_LEN * micro_batch / median, REL_TOL,
                    "tokens_per_s_per_gpu vs tokens per rank / median")

    ranks = [p["rank"] for p in res["per_rank"]]
    e2e.check(len(ranks) == np and sorted(set(ranks)) == list(range(np)),
              "per_rank ranks are %r, expected 0..%d once each" % (ranks, np - 1))
    e2e.check(set(res["phases"]) == set(e2e.PHASE_NAMES),
              "phases are %r, expected %r" % (sorted(res["phases"]), e2e.PHASE_NAMES))
    e2e.check(res["phases"]["dispatch"]["group_size"] == ep,
              "dispatch group_size %r != ep %r" % (res["phases"]["dispatch"]["group_size"], ep))

    if balanced:
        model = cfg["model"]
        moe_layers = wl["layers"] - wl["dense_layers"]
        want = (moe_layers * 2 * wl["tokens_per_rank"] * model["num_experts_per_tok"] *
                model["hidden_size"] * FP32_BYTES)
        # Balanced routing sends exactly top_k rows per token; the measured bytes are a mean over
        # ranks and steps of identical values, so only rounding of that mean can differ.
        e2e.check_close(res["phases"]["dispatch"]["bytes"], want, 1e-12,
                        "results.phases.dispatch.bytes (balanced routing)")
        e2e.check_close(res["phases"]["combine"]["bytes"], want, 1e-12,
                        "results.phases.combine.bytes (balanced routing)")
        e2e.check_close(rep["accounting"]["collective_bytes"]["dispatch"], want, 1e-12,
                        "accounting.collective_bytes.dispatch")

    # Only rank 0 prints the table: one verification line and one report line on stdout.
    verif_lines = [l for l in r.stdout.splitlines() if "verification" in l]
    e2e.check(len(verif_lines) == 1, "expected one stdout line with 'verification', got %d:\n%s" %
              (len(verif_lines), "\n".join(verif_lines)), r)
    e2e.check(r.stdout.count("# report:") == 1, "expected one '# report:' line on stdout", r)


def make_layout_test(np, ep):
    def test(ctx):
        with tempfile.TemporaryDirectory() as tmp:
            r, rep = run_tiny(ctx, tmp, np, ep)
            check_report(ctx, r, rep, np, ep)

    test.__name__ = "test_verify_np%d_ep%d" % (np, ep)
    return test


LAYOUTS = [(1, 1), (2, 1), (2, 2), (4, 4), (4, 1), (4, 2), (8, 4), (8, 8)]


def test_ranks_per_node_2(ctx):
    with tempfile.TemporaryDirectory() as tmp:
        r, rep = run_tiny(ctx, tmp, 4, 4, ["--ranks-per-node", "2"])
        check_report(ctx, r, rep, 4, 4)
        par = rep["parallel"]
        e2e.check(par["nodes"] == 2 and par["ranks_per_node"] == 2 and par["emulated_nodes"],
                  "parallel is %r, expected 2 emulated nodes of 2 ranks" % par)
        nodes = [p["node"] for p in sorted(rep["results"]["per_rank"], key=lambda p: p["rank"])]
        e2e.check(nodes == [0, 0, 1, 1], "per_rank nodes are %r, expected [0, 0, 1, 1]" % nodes)


def test_reduce_scatter(ctx):
    with tempfile.TemporaryDirectory() as tmp:
        r, rep = run_tiny(ctx, tmp, 4, 2, ["--grad-reduce", "reduce-scatter"])
        check_report(ctx, r, rep, 4, 2)
        e2e.check(rep["config"]["grad_reduce"] == "reduce-scatter",
                  "config.grad_reduce is %r" % rep["config"]["grad_reduce"])
        e2e.check(rep["accounting"]["collective_bytes"]["param_allgather"] > 0,
                  "ZeRO-1 run reports no parameter all-gather bytes")


def test_router_routing(ctx):
    with tempfile.TemporaryDirectory() as tmp:
        r, rep = run_tiny(ctx, tmp, 4, 2, ["--routing", "router"])
        check_report(ctx, r, rep, 4, 2, balanced=False)
        e2e.check(rep["config"]["workload"]["routing"] == "router",
                  "workload.routing is %r" % rep["config"]["workload"]["routing"])


def test_zipf_routing(ctx):
    with tempfile.TemporaryDirectory() as tmp:
        r, rep = run_tiny(ctx, tmp, 4, 4, ["--routing", "zipf:1.2"])
        check_report(ctx, r, rep, 4, 4, balanced=False)
        routing = rep["config"]["workload"]["routing"]
        e2e.check(routing.startswith("zipf:") and abs(float(routing[5:]) - 1.2) < 1e-12,
                  "workload.routing is %r, expected zipf:1.2" % routing)


def test_attention_off(ctx):
    with tempfile.TemporaryDirectory() as tmp:
        r, rep = run_tiny(ctx, tmp, 2, 2, ["--attention", "off"])
        check_report(ctx, r, rep, 2, 2)
        e2e.check(rep["config"]["workload"]["attention"] is False,
                  "workload.attention is not false")
        e2e.check(rep["results"]["phases"]["attention"]["flops"] == 0,
                  "attention off but the attention phase counts %r FLOP" %
                  rep["results"]["phases"]["attention"]["flops"])


def test_micro_batch_2(ctx):
    with tempfile.TemporaryDirectory() as tmp:
        r, rep = run_tiny(ctx, tmp, 2, 2, ["--micro-batch", "2"])
        check_report(ctx, r, rep, 2, 2, micro_batch=2)


def test_corrupt_dispatch_fails_verification(ctx):
    with tempfile.TemporaryDirectory() as tmp:
        r, rep = run_tiny(ctx, tmp, 4, 4, ["--test-corrupt-dispatch", "1"],
                          expect_rc=e2e.EXIT_VERIFICATION)
        check_report(ctx, r, rep, 4, 4, expect_pass=False)
        v = rep["verification"]
        e2e.check(v["enabled"] is True and v["passed"] is False and v["mismatches"] > 0,
                  "corrupted run: verification enabled %r, passed %r, mismatches %r" %
                  (v["enabled"], v["passed"], v["mismatches"]))
        e2e.check("verification failed" in r.stderr, "stderr does not say verification failed", r)


def test_without_verify(ctx):
    with tempfile.TemporaryDirectory() as tmp:
        r, rep = run_tiny(ctx, tmp, 2, 2, verify=False)
        check_report(ctx, r, rep, 2, 2, verify=False)


TESTS = [make_layout_test(n, e) for n, e in LAYOUTS] + [
    test_ranks_per_node_2,
    test_reduce_scatter,
    test_router_routing,
    test_zipf_routing,
    test_attention_off,
    test_micro_batch_2,
    test_corrupt_dispatch_fails_verification,
    test_without_verify,
]

if __name__ == "__main__":
    e2e.run_main(TESTS)
