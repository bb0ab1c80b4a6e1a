"""Synthetic run reports for the scaling-report tests and benchmark, made from a real one.

A real `moebench run` report is copied and its sizes and figures are changed: the GPU count, nodes
and hosts, the step time (from a chosen TFLOP/s per GPU), the phases (a chosen communication share
of the step), optionally the model (from `moebench plan --json`). Every such report is marked
synthetic: meta.synthetic is true and meta.argv starts with "(synthetic)". The figures stay
consistent the way moebench computes them (TFLOP/s = FLOPs per GPU per step / step time), so a
scaling report over them can be checked against hand-computed efficiencies.

    python3 tests/e2e/report_fixtures.py --binary build/moebench --out DIR
writes run-256.json, run-512.json and run-1024.json (DeepSeek-V3, 1,648 / 1,624 / 1,606 TFLOP/s
per GPU) into DIR, for the README example and for looking at the plot.
"""

import argparse
import copy
import json
import os
import subprocess
import sys


# The 256/512/1,024-GPU set: TFLOP/s per GPU and the communication share of the step. 1,606 / 1,648
# = 0.9745: a 0.97 efficiency claim passes; FAILING_1024 gives 0.9612, so the same claim fails.
DSV3_SET = [(256, 1648.0, 0.08), (512, 1624.0, 0.12), (1024, 1606.0, 0.16)]
FAILING_1024 = 1584.0


def _scale_stats(stats, factor):
    out = dict(stats)
    for k in ("median", "mean", "min", "max", "p95", "stddev"):
        out[k] = stats[k] * factor
    return out


def use_model(report, plan):
    """Puts the model, workload and accounting of `moebench plan --json` into a run report."""
    r = copy.deepcopy(report)
    r["config"]["model"] = plan["config"]["model"]
    r["config"]["workload"] = plan["config"]["workload"]
    r["config"]["precision"] = "bf16"
    for scope in ("full_model", "instantiated"):
        r["accounting"][scope] = plan["accounting"][scope]
    old_bytes = r["accounting"]["collective_bytes"]
    new_bytes = plan["accounting"]["collective_bytes_bf16"]
    r["accounting"]["collective_bytes"] = new_bytes
    # Each communication phase sends what the new model's accounting says.
    for name, keys in (("dispatch", ["dispatch"]), ("combine", ["combine"]),
                       ("grad_reduce", ["dense_grad_reduce", "expert_grad_reduce"])):
        old = sum(old_bytes[k] for k in keys)
        factor = sum(new_bytes[k] for k in keys) / old if old else 1.0
        ph = r["results"]["phases"][name]
        for k in ("bytes", "algbw", "busbw"):
            ph[k] *= factor
    return r


def synthetic_run(real, gpus, tflops, comm_share=0.1, ranks_per_node=8, ep=None, job_id=None,
                  micro_batch=None, verification_passed=None, steps=None, per_rank=None):
    """A copy of `real` run at `gpus` GPUs that achieved `tflops` TFLOP/s per GPU.

    comm_share: the communication phases' share of the step (all of it exposed).
    micro_batch: changes the sequences per GPU (tokens per rank and FLOPs follow).
    verification_passed: True/False sets a verification result (False: 7 mismatches).
    per_rank: how many per-rank entries to write (default: one per GPU).
    """
    r = copy.deepcopy(real)
    meta = r["meta"]
    meta["synthetic"] = True
    meta["argv"] = ["(synthetic)"] + meta["argv"]
    nodes = max(1, gpus // ranks_per_node)
    rpn = gpus if gpus < ranks_per_node else ranks_per_node
    meta["hosts"] = ["node%04d" % i for i in range(nodes)]
    meta["environment"] = {"SLURM_JOB_ID": str(job_id if job_id is not None else 900000 + gpus)}
    if steps is not None:
        r["config"]["steps"] = steps

    wl = r["config"]["workload"]
    if micro_batch is not None:
        wl["micro_batch"] = micro_batch
    # One micro-batch a step, no pipeline: every GPU holds its own sequences.
    wl["tokens_per_micro_batch"] = wl["micro_batch"] * wl["seq_len"]
    wl["tokens_per_rank"] = wl["tokens_per_micro_batch"]
    wl["global_batch"] = wl["micro_batch"] * gpus
    wl["microbatches_per_step"] = 1
    wl["tokens_per_step"] = wl["global_batch"] * wl["seq_len"]
    tokens_per_rank = wl["tokens_per_rank"]
    ep = ep if ep is not None else r["parallel"]["ep"]
    pipeline = r["parallel"]["pipeline"]
    r["parallel"] = {"world": gpus, "ep": ep, "dp": gpus, "edp": gpus // ep, "nodes": nodes,
                     "ranks_per_node": rpn, "emulated_nodes": False, "pipeline": pipeline}
    acc = r["accounting"]
    for scope in ("full_model", "instantiated"):
        acc[scope]["tokens_per_step"] = float(tokens_per_rank * gpus)
        acc[scope]["flops_per_step"] = acc[scope]["flops_per_token"] * tokens_per_rank * gpus

    res = r["results"]
    real_res = real["results"]
    flops_per_gpu = acc["instantiated"]["flops_per_token"] * tokens_per_rank
    step = flops_per_gpu / (tflops * 1e12)
    factor = step / real_res["step_time_s"]["median"]
    res["step_time_s"] = _scale_stats(real_res["step_time_s"], factor)
    res["step_times_s"] = [t * factor for t in real_res["step_times_s"]]
    if steps is not None:
        res["step_times_s"] = (res["step_times_s"] * steps)[:steps]
        res["step_time_s"]["count"] = steps
    res["tflops_per_gpu"] = tflops
    res["tokens_per_s_per_gpu"] = tokens_per_rank / step

    # Phases: the communication ones take comm_share of the step, the compute ones the rest, each
    # in its real proportion; so they add up to the step and all communication is exposed.
    # Which phases are communication is the real report's word (each phase records its kind).
    real_ph = real_res["phases"]
    communication = {p for p, v in real_ph.items() if v["kind"] == "communication"}
    comm_total = sum(real_ph[p]["time_s"]["median"] for p in communication)
    comp_total = sum(v["time_s"]["median"] for p, v in real_ph.items() if p not in communication)
    flop_factor = flops_per_gpu / (real["accounting"]["instantiated"]["flops_per_token"] *
                                   real["config"]["workload"]["tokens_per_rank"])
    # The all-to-alls carry each token's hidden state: their bytes follow the tokens per rank.
    token_factor = tokens_per_rank / real["config"]["workload"]["tokens_per_rank"]
    byte_factor = {"dispatch": token_factor, "combine": token_factor, "grad_reduce": 1.0}
    # The communication split as at scale, where the all-to-alls dominate (fixed, so that the
    # example's growth lines do not follow the noise of the small real run).
    comm_split = {"dispatch": 0.4, "combine": 0.35, "grad_reduce": 0.25}
    for name, ph in res["phases"].items():
        old = real_ph[name]["time_s"]["median"]
        share = comm_share * comm_split.get(name, old / comm_total) if name in communication \
            else (1 - comm_share) * old / comp_total
        t = share * step
        ph["time_s"] = _scale_stats(real_ph[name]["time_s"], t / old if old > 0 else 0.0)
        ph["flops"] = real_ph[name]["flops"] * flop_factor
        ph["flop_rate"] = ph["flops"] / t if ph["flops"] and t > 0 else 0.0
        if name in communication:
            ph["bytes"] = real_ph[name]["bytes"] * byte_factor[name]
            ph["algbw"] = ph["bytes"] / t if t > 0 else 0.0
            bus_factor = real_ph[name]["busbw"] / real_ph[name]["algbw"] if real_ph[name]["algbw"] else 0
            ph["busbw"] = ph["algbw"] * bus_factor
            ph["group_size"] = ep if name != "grad_reduce" else gpus
    res["compute_time_s"] = (1 - comm_share) * step
    res["communication_time_s"] = comm_share * step
    res["exposed_communication_s"] = comm_share * step
    template = real_res["per_rank"][0]
    count = gpus if per_rank is None else min(per_rank, gpus)
    res["per_rank"] = []
    for rank in range(count):
        entry = copy.deepcopy(template)
        entry["rank"] = rank
        entry["node"] = rank // rpn
        entry["host"] = meta["hosts"][min(rank // rpn, nodes - 1)]
        entry["step_time_s"] = step
        entry["phase_time_s"] = {p: res["phases"][p]["time_s"]["median"] for p in res["phases"]}
        res["per_rank"].append(entry)
    # Every rank reported (what a real run of that size says).
    r["status"]["ranks_reporting"] = gpus
    # The rank that sets the step time: rank 0, whose phases add up to the step exactly.
    res["step_breakdown"] = {"rank": 0, "host": meta["hosts"][0], "stage": 0, "step": 0,
                             "step_time_s": step,
                             "phase_time_s": {p: res["phases"][p]["time_s"]["median"]
                                              for p in res["phases"]},
                             "other_s": 0.0}

    if verification_passed is not None:
        v = r["verification"]
        v["enabled"] = True
        v["passed"] = bool(verification_passed)
        v["mismatches"] = 0 if verification_passed else 7
        if not v["compared"]:
            v["compared"] = 1000
    return r


def write(report, path):
    with open(path, "w") as f:
        json.dump(report, f, indent=1)
    return path


def real_run(binary, out_path, np=2, ep=2, extra=()):
    """Runs the tiny preset for real and returns its report."""
    env = dict(os.environ)
    if os.geteuid() == 0:
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    cmd = ["mpirun", "-np", str(np), "--oversubscribe", binary, "run", "--preset",
           "deepseek-v3-tiny", "--ep", str(ep), "--warmup", "1", "--steps", "5", "--quiet",
           "--out", out_path] + list(extra)
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL, timeout=300)
    with open(out_path) as f:
        return json.load(f)


def dsv3_plan(binary, gpus=256, ep=64):
    out = subprocess.run([binary, "plan", "--preset", "deepseek-v3", "--world", str(gpus), "--ep",
                          str(ep), "--json"], check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--binary", required=True)
    p.add_argument("--out", required=True, help="folder for run-256.json ... run-1024.json")
    p.add_argument("--real", help="a real run report to start from (default: run one at 2 ranks)")
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    if a.real:
        with open(a.real) as f:
            real = json.load(f)
    else:
        real = real_run(a.binary, os.path.join(a.out, "real-np2.json"))
    base = use_model(real, dsv3_plan(a.binary))
    for gpus, tflops, comm in DSV3_SET:
        path = write(synthetic_run(base, gpus, tflops, comm, ep=64, verification_passed=True),
                     os.path.join(a.out, "run-%d.json" % gpus))
        print(path)


if __name__ == "__main__":
    sys.exit(main())
