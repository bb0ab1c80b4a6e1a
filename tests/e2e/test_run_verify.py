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


COMM_PHASES = ("dispatch", "combine", "grad_reduce")


def check_communication(rep, overlap=True, buckets=None):
    """The overlap fields: present, consistent with the phases, and what a host backend can give.

    On the cpu backend with MPI the host does the communication's work: every start and wait of a
    collective runs inside a timed scope of its phase, and its busy time is host time inside
    those calls on the same clock, so each rank's phase time is at least its busy time, and so
    are the slowest rank's and their medians. Hence exposed >= busy per phase and nothing is
    hidden; a GPU backend can hide communication, which this cannot test.
    """
    cfg, res = rep["config"], rep["results"]
    e2e.check(cfg["overlap"] is overlap,
              "config.overlap is %r, expected %r" % (cfg["overlap"], overlap))
    e2e.check(isinstance(cfg["grad_bucket_bytes"], int) and cfg["grad_bucket_bytes"] >= 0,
              "config.grad_bucket_bytes is %r" % cfg["grad_bucket_bytes"])
    busy_sum = exposed_sum = 0.0
    for name in COMM_PHASES:
        ph = res["phases"][name]
        e2e.check("busy_s" in ph, "phases.%s has no busy_s" % name)
        busy, t = ph["busy_s"], ph["time_s"]
        e2e.check(busy["median"] > 0, "phases.%s.busy_s.median is %r" % (name, busy["median"]))
        for stat in ("min", "median", "max"):
            # The reported doubles round-trip; 1e-12 relative covers only the JSON printing.
            e2e.check(t[stat] >= busy[stat] * (1 - 1e-12),
                      "phases.%s: time_s.%s %r < busy_s.%s %r on a host backend" %
                      (name, stat, t[stat], stat, busy[stat]))
        # A group of one rank moves nothing: no bandwidth.
        moved = ph["bytes"] / busy["median"] if ph["group_size"] > 1 else 0.0
        e2e.check_close(ph["algbw"], moved, REL_TOL,
                        "phases.%s.algbw vs bytes / busy median" % name)
        busy_sum += busy["median"]
        exposed_sum += t["median"]
    for name in set(res["phases"]) - set(COMM_PHASES):
        e2e.check("busy_s" not in res["phases"][name], "compute phase %s has busy_s" % name)
    ov = res["communication_overlap"]
    e2e.check_close(ov["busy_s"], busy_sum, REL_TOL, "communication_overlap.busy_s")
    e2e.check_close(ov["exposed_s"], exposed_sum, REL_TOL, "communication_overlap.exposed_s")
    e2e.check_close(ov["exposed_s"], res["communication_time_s"], REL_TOL,
                    "communication_overlap.exposed_s vs communication_time_s")
    # Exposed >= busy holds per phase, so the sums do too, up to the rounding of the sums.
    e2e.check(ov["hidden_s"] <= 1e-9 * ov["busy_s"] and ov["overlap_fraction"] <= 1e-9,
              "a host backend hid communication: %r" % ov)
    if buckets is not None:
        e2e.check(res["grad_buckets"] == buckets,
                  "results.grad_buckets is %r, expected %r" % (res["grad_buckets"], buckets))


def check_report(ctx, r, rep, np, ep, verify=True, micro_batch=1, balanced=True,
                 expect_pass=True, overlap=True, buckets=None):
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
        # The decoder's MoE layers and the MTP layer (an MoE layer of its own, with its own
        # all-to-alls).
        moe_layers = wl["layers"] - wl["dense_layers"] + wl["mtp_layers"]
        rows = moe_layers * 2 * wl["tokens_per_rank"] * model["num_experts_per_tok"]
        want = rows * model["hidden_size"] * FP32_BYTES
        # The dispatch carries each row's FP32 combine weight forward and its gradient back.
        want_dispatch = want + rows * 4
        # Balanced routing sends exactly top_k rows per token; the measured bytes are a mean over
        # ranks and steps of identical values, so only rounding of that mean can differ.
        e2e.check_close(res["phases"]["dispatch"]["bytes"], want_dispatch, 1e-12,
                        "results.phases.dispatch.bytes (balanced routing)")
        e2e.check_close(res["phases"]["combine"]["bytes"], want, 1e-12,
                        "results.phases.combine.bytes (balanced routing)")
        e2e.check_close(rep["accounting"]["collective_bytes"]["dispatch"], want_dispatch, 1e-12,
                        "accounting.collective_bytes.dispatch")

    check_communication(rep, overlap, buckets)

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


def test_deepseek_v2_routing(ctx):
    """DeepSeek-V2's and V2-Lite's own routing, read from their config.json (scaled down in
    tests/data): softmax scores, group_limited_greedy or greedy selection, weights not normalised.
    pp 2, ep 2, the router's own selection: the run verifies against the single-process
    reference and its report says which routing ran."""
    for name, method, scaling in (("deepseek-v2-lite-tiny", "greedy", 1.0),
                                  ("deepseek-v2-tiny", "group_limited_greedy", 16.0)):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "r.json")
            config = os.path.join(ctx.test_data, name + ".config.json")
            r = e2e.run_moebench(ctx, ["run", "--model-config", config, "--ep", 2, "--pp", 2,
                                       "--seq-len", 64, "--global-batch", 4, "--routing", "router",
                                       "--verify",
                                       "--warmup", 1, "--steps", 2, "--quiet", "--out", out],
                                 np=4, timeout=180)
            e2e.check(r.rc == 0, "%s: exit %r" % (name, r.rc), r)
            rep = e2e.load_report(ctx, out)
            m = rep["config"]["model"]
            e2e.check((m["scoring_func"], m["topk_method"], m["norm_topk_prob"],
                       m["routed_scaling_factor"]) == ("softmax", method, False, scaling),
                      "%s: the report's routing is %r" % (name, m))
            e2e.check(rep["verification"]["passed"] and rep["verification"]["compared"] > 0,
                      "%s did not verify: %r" % (name, rep["verification"]))
            print("  %s: %s, verified (max abs error %.2g)" %
                  (name, method, rep["verification"]["max_abs_error"]))


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


def test_head_off(ctx):
    """--head off: the decoder alone, from a seeded input to a seeded output gradient."""
    with tempfile.TemporaryDirectory() as tmp:
        r, rep = run_tiny(ctx, tmp, 2, 2, ["--head", "off"])
        check_report(ctx, r, rep, 2, 2)
        wl = rep["config"]["workload"]
        e2e.check(wl["head"] is False and wl["mtp_layers"] == 0, "head %r, mtp %r" %
                  (wl["head"], wl["mtp_layers"]))
        e2e.check(rep["results"]["phases"]["head"]["flops"] == 0, "the head phase counts FLOPs")
        not_run = rep["accounting"]["not_run"]
        e2e.check(not_run == ["embedding", "output head", "loss", "mtp layer 0"],
                  "accounting.not_run %r" % not_run)
        inst, full = rep["accounting"]["instantiated"], rep["accounting"]["full_model"]
        e2e.check(inst["flops_per_token"] < full["flops_per_token"],
                  "the decoder alone counts %r FLOP/token, the full model %r" %
                  (inst["flops_per_token"], full["flops_per_token"]))
        names = {t["name"] for t in rep["verification"]["tensors"]}
        e2e.check({"output", "input_grad"} <= names and "loss" not in names,
                  "verified tensors %r" % names)


def test_micro_batch_2(ctx):
    with tempfile.TemporaryDirectory() as tmp:
        r, rep = run_tiny(ctx, tmp, 2, 2, ["--micro-batch", "2"])
        check_report(ctx, r, rep, 2, 2, micro_batch=2)


def test_corrupt_dispatch_fails_verification(ctx):
    with tempfile.TemporaryDirectory() as tmp:
        r, rep = run_tiny(ctx, tmp, 4, 4, ["--inject", "corrupt:rank=1"],
                          expect_rc=e2e.EXIT_VERIFICATION)
        check_report(ctx, r, rep, 4, 4, expect_pass=False)
        v = rep["verification"]
        e2e.check(v["enabled"] is True and v["passed"] is False and v["mismatches"] > 0,
                  "corrupted run: verification enabled %r, passed %r, mismatches %r" %
                  (v["enabled"], v["passed"], v["mismatches"]))
        e2e.check("verification failed" in r.stderr, "stderr does not say verification failed", r)


def make_overlap_off_test(np, ep, extra=()):
    def test(ctx):
        with tempfile.TemporaryDirectory() as tmp:
            r, rep = run_tiny(ctx, tmp, np, ep, ["--overlap", "off"] + list(extra))
            balanced = "--routing" not in extra
            # Without overlap each group is reduced by one collective after the backward.
            check_report(ctx, r, rep, np, ep, balanced=balanced, overlap=False,
                         buckets={"dense": 1, "expert": 1})

    suffix = "_" + "_".join(extra) if extra else ""
    test.__name__ = "test_overlap_off_np%d_ep%d%s" % (np, ep, suffix)
    return test


def test_buckets_per_layer(ctx):
    """--grad-bucket-mb 0: one bucket per layer and group.

    Dense: every decoder layer, the embedding, the final norm, each MTP layer and the output head
    (each its own layer index); expert: the MoE layers and the MTP layer.
    """
    with tempfile.TemporaryDirectory() as tmp:
        r, rep = run_tiny(ctx, tmp, 4, 2, ["--grad-bucket-mb", "0", "--routing", "zipf:1.2"])
        wl = rep["config"]["workload"]
        mtp = wl["mtp_layers"]
        check_report(ctx, r, rep, 4, 2, balanced=False,
                     buckets={"dense": wl["layers"] + 3 + mtp,
                              "expert": wl["layers"] - wl["dense_layers"] + mtp})
        e2e.check(rep["config"]["grad_bucket_bytes"] == 0,
                  "config.grad_bucket_bytes is %r" % rep["config"]["grad_bucket_bytes"])


def test_default_bucket_holds_the_tiny_model(ctx):
    """The default 80 MiB bucket takes all of the tiny model's layers: one per group."""
    with tempfile.TemporaryDirectory() as tmp:
        r, rep = run_tiny(ctx, tmp, 2, 2)
        check_report(ctx, r, rep, 2, 2, buckets={"dense": 1, "expert": 1})
        e2e.check(rep["config"]["grad_bucket_bytes"] == 80 << 20,
                  "config.grad_bucket_bytes is %r" % rep["config"]["grad_bucket_bytes"])
        e2e.check("# communication: busy" in r.stdout and "overlap on" in r.stdout,
                  "the table has no communication line", r)


def test_reduce_scatter_overlap_per_layer(ctx):
    """ZeRO-1 keeps one reduce-scatter per group, whatever the bucket size."""
    with tempfile.TemporaryDirectory() as tmp:
        r, rep = run_tiny(ctx, tmp, 4, 2, ["--grad-reduce", "reduce-scatter", "--grad-bucket-mb",
                                           "0"])
        check_report(ctx, r, rep, 4, 2, buckets={"dense": 1, "expert": 1})


def test_without_verify(ctx):
    with tempfile.TemporaryDirectory() as tmp:
        r, rep = run_tiny(ctx, tmp, 2, 2, verify=False)
        check_report(ctx, r, rep, 2, 2, verify=False)


TESTS = [make_layout_test(n, e) for n, e in LAYOUTS] + [
    test_ranks_per_node_2,
    test_reduce_scatter,
    test_router_routing,
    test_deepseek_v2_routing,
    test_zipf_routing,
    test_attention_off,
    test_head_off,
    test_micro_batch_2,
    test_corrupt_dispatch_fails_verification,
    test_without_verify,
    make_overlap_off_test(1, 1),
    make_overlap_off_test(2, 2),
    make_overlap_off_test(4, 2),
    make_overlap_off_test(4, 4, ("--routing", "zipf:1.2")),
    make_overlap_off_test(4, 2, ("--grad-reduce", "reduce-scatter")),
    test_buckets_per_layer,
    test_default_bucket_holds_the_tiny_model,
    test_reduce_scatter_overlap_per_layer,
]

if __name__ == "__main__":
    e2e.run_main(TESTS)
