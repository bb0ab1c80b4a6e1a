"""`moebench accept` with what a site brings, on the cpu backend with emulated nodes: NVML's
inventory and the burn-in's telemetry against the NVML stand-in the tests build (a GPU with ECC
errors, a power limit apart, thermal slowdown, one NVML does not know), a uniformly slow rack
failing against a known-good node's report (--baseline), DCGM's results naming their node
(--dcgm), and accept-merge joining per-node reports into one verdict, naming the node whose job
wrote none. Each fault names exactly its node in drain.txt."""

import json
import os
import shutil
import socket
import tempfile

import moebench_e2e as e2e
from accept_e2e import ACCEPTANCE, accept, fake_nvml, node_of, outputs


def test_nvml_inventory_names_its_node(ctx):
    """accept's NVML inventory against the NVML stand-in the tests build (tests/fake_nvml, first in
    LD_LIBRARY_PATH): every rank's GPU read and passing; then rank 3 with 2 uncorrected ECC errors
    and rank 2 with a 500 W power limit where its peers have 700 W, both on the second node: each
    rank's `nvml` check fails, and drain.txt names that node alone."""
    with fake_nvml(ctx):
        with tempfile.TemporaryDirectory() as tmp:
            r, doc, drain = accept(ctx, os.path.join(tmp, "clean"))
            nvml = [c for c in doc["checks"] if c["name"] == "nvml"]
            e2e.check(len(nvml) == 4 and all(c["status"] == "pass" for c in nvml) and
                      all(x["nvml"]["nvlinks_up"] == 18 for x in doc["ranks"]),
                      "four GPUs read, each passing: %r" % nvml, r)
            os.environ["MOEBENCH_FAKE_NVML"] = "rank=3:ecc=2;rank=2:power_w=500"
            r, doc, drain = accept(ctx, os.path.join(tmp, "bad"), rc=ACCEPTANCE)
            bad = [(c["name"], c["rank"]) for c in doc["checks"] if c["status"] == "fail"]
            e2e.check(bad == [("nvml", 2), ("nvml", 3)], "ranks 2 and 3's GPUs: %r" % bad, r)
            e2e.check(len(drain) == 1 and "NodeName=%s " % node_of(doc, 3) in drain[0] and
                      node_of(doc, 2) == node_of(doc, 3), "their node alone: %r" % drain, r)


def test_burn_in_telemetry_names_a_hot_gpu(ctx):
    """The burn-in's GPU telemetry through the NVML stand-in: every rank's clock, temperature and
    power a round, each rank's `burnin_telemetry` passing; then rank 1's GPU in hardware thermal
    slowdown (MOEBENCH_FAKE_NVML rank=1:throttle=64) and rank 2's GPU unknown to NVML (absent=1):
    rank 1's check alone fails, naming the share, rank 2's is `info` with the reason while the
    others keep their telemetry, and drain.txt names rank 1's node alone."""
    with fake_nvml(ctx):
        with tempfile.TemporaryDirectory() as tmp:
            r, doc, drain = accept(ctx, os.path.join(tmp, "clean"), ["--duration", "2s"])
            b = doc["burnin"]
            e2e.check(b["telemetry_note"] is None, "every rank has telemetry: %r" % b, r)
            for x in b["ranks"]:
                t = x["telemetry"]
                e2e.check(t is not None and len(t["sm_clock_mhz"]) == b["rounds"] and
                          all(n >= 1 for n in t["samples"]) and
                          all(v == 1980 for v in t["sm_clock_mhz"]) and
                          all(v == 62 for v in t["temperature_c"]),
                          "a reading a round at the stand-in's figures: %r" % t, r)
            tel = [c for c in doc["checks"] if c["name"] == "burnin_telemetry"]
            e2e.check(len(tel) == 4 and all(c["status"] == "pass" for c in tel),
                      "four GPUs, each passing: %r" % tel, r)
            os.environ["MOEBENCH_FAKE_NVML"] = "rank=1:throttle=64;rank=2:absent=1"
            r, doc, drain = accept(ctx, os.path.join(tmp, "hot"), ["--duration", "2s"],
                                   rc=ACCEPTANCE)
            bad = [(c["name"], c["rank"]) for c in doc["checks"] if c["status"] == "fail"]
            e2e.check(bad == [("burnin_telemetry", 1)], "rank 1's GPU alone: %r" % bad, r)
            hot = [c for c in doc["checks"] if c["name"] == "burnin_telemetry" and c["rank"] == 1]
            e2e.check(hot[0]["measured"] == 1 and "slowed down" in hot[0]["reason"] and
                      "up to 92 C" in hot[0]["reason"], "the share and why: %r" % hot[0], r)
            e2e.check(len(drain) == 1 and "NodeName=%s " % node_of(doc, 1) in drain[0],
                      "its node alone: %r" % drain, r)
            absent = [c for c in doc["checks"] if c["name"] == "burnin_telemetry" and
                      c["rank"] == 2]
            b = doc["burnin"]
            e2e.check(absent[0]["status"] == "info" and "no GPU telemetry" in absent[0]["reason"]
                      and b["ranks"][2]["telemetry"] is None and
                      b["telemetry_note"].startswith("rank 2: NVML does not know") and
                      all(b["ranks"][i]["telemetry"] is not None for i in (0, 1, 3)),
                      "rank 2 without telemetry, the others with: %r" % absent, r)


def test_baseline_fails_a_uniformly_slow_rack(ctx):
    """Against its peers alone a rack slowed evenly passes; against a known-good node's report
    (--baseline) every rank fails, and both nodes are drained. --floor 0.25: oversubscribed cpu
    ranks of two runs differ by up to about 2x, the injected slowdown is 8x."""
    with tempfile.TemporaryDirectory() as tmp:
        good = os.path.join(tmp, "good")
        accept(ctx, good)
        baseline = ["--baseline", os.path.join(good, "accept.json"), "--floor", "0.25"]
        r, doc, drain = accept(ctx, os.path.join(tmp, "same"), baseline)
        e2e.check(doc["passed"] and drain == [], "the same machine passes its own baseline", r)
        slow = ["--inject", "slow:rank=all,factor=8,work=gemm"]
        r, doc, drain = accept(ctx, os.path.join(tmp, "peers"), slow)
        e2e.check(doc["passed"], "evenly slow: no rank slower than its peers, nominal figures", r)
        r, doc, drain = accept(ctx, os.path.join(tmp, "slow"), baseline + slow, ACCEPTANCE)
        gemm = [c for c in doc["checks"] if c["name"] == "gemm_rate"]
        e2e.check(len(gemm) == 4 and all(c["status"] == "fail" and
                                         c["source"].startswith("--baseline ") for c in gemm),
                  "every rank's GEMM rate fails against the baseline: %r" % gemm, r)
        e2e.check(len(drain) == 2, "both nodes drained: %r" % drain, r)


def test_dcgm_results_name_their_node(ctx):
    """--dcgm with %h: each emulated node's dcgmi diag -j file (DCGM 4.x passing on the first,
    3.x with GPU 1's PCIe test failed on the second): one drain line, the second node, for its
    rank of local index 1 (rank 3)."""
    host = socket.gethostname()
    data = os.path.join(ctx.repo, "tests", "data", "dcgm")
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(os.path.join(data, "diag-4.2-pass.json"), os.path.join(tmp, host + "-n0.json"))
        shutil.copy(os.path.join(data, "diag-3.3-gpu1-pcie.json"),
                    os.path.join(tmp, host + "-n1.json"))
        r, doc, drain = accept(ctx, os.path.join(tmp, "acc"),
                               ["--dcgm", os.path.join(tmp, "%h.json")], ACCEPTANCE)
        e2e.check(len(drain) == 1 and drain[0].startswith("scontrol update NodeName=%s " %
                                                          node_of(doc, 3)) and "dcgm rank 3" in
                  drain[0], "one drain line, rank 3's node: %r" % drain, r)
        dcgm = [c for c in doc["checks"] if c["name"] == "dcgm"]
        e2e.check([c["status"] for c in dcgm] == ["pass", "fail"] and dcgm[1]["rank"] == 3 and
                  "PCIe replays" in dcgm[1]["reason"], "a pass and rank 3's PCIe: %r" % dcgm, r)
        # One file for two nodes: which node's results they are cannot be told.
        r = e2e.run_moebench(ctx, ["accept", "--system", "cpu", "--ranks-per-node", 2, "--out",
                                   os.path.join(tmp, "never"), "--dcgm",
                                   os.path.join(data, "diag-4.2-pass.json")], np=4, timeout=120)
        e2e.check(r.rc == e2e.EXIT_USAGE and "put %h in the path" in r.stderr and
                  not os.path.exists(os.path.join(tmp, "never", "accept.json")),
                  "one file for two nodes: exit 2", r)


def relabel(path, node):
    """Stands a one-node job's report for node `node`: the emulated fleet is one host, and a
    real fleet's per-node jobs each run on their own."""
    with open(path) as f:
        doc = json.load(f)
    for x in doc["ranks"]:
        x["node_name"] = x["host"] = node
    for c in doc["checks"]:
        if c["node"] is not None:
            c["node"] = node
    with open(path, "w") as f:
        json.dump(doc, f)


def test_merge_names_the_nodes_to_drain(ctx):
    """Two single-node jobs and one that wrote nothing, merged: the corrupt GEMM its own two-rank
    job could not pin on a rank is named by the fleet (3 of 4 agree), and the node whose job
    wrote no report is named from --nodes."""
    with tempfile.TemporaryDirectory() as tmp:
        jobs = {}
        for node, extra, rc in (("nodeA", [], 0), ("nodeB", ["--inject", "sdc:rank=1"], ACCEPTANCE)):
            out = os.path.join(tmp, node)
            r = e2e.run_moebench(ctx, ["accept", "--system", "cpu", "--out", out] + extra, np=2,
                                 timeout=300)
            e2e.check(r.rc == rc, "the %s job: exit %d" % (node, rc), r)
            relabel(os.path.join(out, "accept.json"), node)
            jobs[node] = out
        os.makedirs(os.path.join(tmp, "nodeC"))  # its job made the directory, then died
        merged = os.path.join(tmp, "merged")
        r = e2e.run_moebench(ctx, ["accept-merge", jobs["nodeA"], jobs["nodeB"] + "/accept.json",
                                   os.path.join(tmp, "nodeC"), "--out", merged,
                                   "--nodes", "nodeA,nodeB,nodeC"], timeout=60)
        e2e.check(r.rc == ACCEPTANCE, "the merge fails: exit 9", r)
        doc, drain = outputs(ctx, merged, r)
        e2e.check(len(drain) == 2 and "NodeName=nodeB " in drain[0] and
                  "fleet_sdc_gemm rank 1" in drain[0] and "NodeName=nodeC " in drain[1] and
                  "report_missing" in drain[1], "nodeB and nodeC drained: %r" % drain, r)
        e2e.check([x["path"] for x in doc["meta"]["reports"]] ==
                  [jobs["nodeA"], jobs["nodeB"] + "/accept.json"], "the two reports listed", r)
        e2e.check({x["report"] for x in doc["ranks"]} == {0, 1}, "ranks keep their report", r)
        e2e.check([c["node"] for c in doc["checks"] if c["name"] == "report_missing"] ==
                  ["nodeC"], "the empty directory, named for its node: one check", r)
        e2e.check("accept-merge: 2 report(s), 3 node(s)" in r.stdout, "the summary line", r)
        # A merge of the healthy node alone passes.
        r = e2e.run_moebench(ctx, ["accept-merge", jobs["nodeA"], "--out", merged, "--quiet"],
                             timeout=60)
        e2e.check(r.rc == 0 and r.stdout == "", "one healthy report passes, quietly", r)
        # A file that is not a report: one line, exit 2, nothing written.
        bad = os.path.join(tmp, "bad.json")
        with open(bad, "w") as f:
            f.write("{}")
        out = os.path.join(tmp, "never")
        r = e2e.run_moebench(ctx, ["accept-merge", jobs["nodeA"], bad, "--out", out], timeout=60)
        e2e.check(r.rc == e2e.EXIT_USAGE and "bad.json: not an acceptance report" in r.stderr and
                  len(r.stderr.strip().splitlines()) == 1 and not os.path.exists(out),
                  "a bad report: one line, exit 2, no output", r)


TESTS = [test_nvml_inventory_names_its_node, test_burn_in_telemetry_names_a_hot_gpu,
         test_baseline_fails_a_uniformly_slow_rack, test_dcgm_results_name_their_node,
         test_merge_names_the_nodes_to_drain]

if __name__ == "__main__":
    e2e.run_main(TESTS)
