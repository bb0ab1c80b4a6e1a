"""`moebench accept` on the cpu backend with two emulated nodes: a clean machine passes with every
output written (accept.json valid against reports/accept.schema.json, accept.md, junit.xml, an
empty drain.txt); a rank whose GEMMs are silently wrong (--inject sdc:rank=3) and a slow rank
(--inject slow:rank=1,factor=4) each fail with exactly one drain line, naming that rank's node;
bad flags are one line, exit 2, and no output."""

import json
import os
import tempfile
import xml.etree.ElementTree as ET

import moebench_e2e as e2e

ACCEPTANCE = 9  # a check failed
FILES = ("accept.json", "accept.md", "junit.xml", "drain.txt")


def validator(ctx):
    import jsonschema  # imported here so a missing module fails a test, not the whole file

    with open(os.path.join(ctx.repo, "reports", "accept.schema.json")) as f:
        return jsonschema.Draft7Validator(json.load(f))


def accept(ctx, out, extra=(), rc=0):
    r = e2e.run_moebench(ctx, ["accept", "--system", "cpu", "--ranks-per-node", 2, "--out", out]
                         + list(extra), np=4, timeout=300)
    e2e.check(r.rc == rc, "accept %s: exit %d" % (" ".join(map(str, extra)), rc), r)
    for name in FILES:
        e2e.check(os.path.isfile(os.path.join(out, name)), "%s written" % name, r)
    with open(os.path.join(out, "accept.json")) as f:
        doc = json.load(f)
    errors = [e.message for e in validator(ctx).iter_errors(doc)]
    e2e.check(not errors, "accept.schema.json: %s" % errors[:3], r)
    with open(os.path.join(out, "drain.txt")) as f:
        drain = f.read().splitlines()
    e2e.check(drain == doc["drain"], "drain.txt is accept.json's drain", r)
    suite = ET.parse(os.path.join(out, "junit.xml")).getroot()
    cases = suite.findall(".//testcase")
    e2e.check(len(cases) == len(doc["checks"]), "one test case a check", r)
    e2e.check(len(suite.findall(".//failure")) ==
              sum(c["status"] == "fail" for c in doc["checks"]), "one failure a failed check", r)
    return r, doc, drain


def node_of(doc, rank):
    return [x["node_name"] for x in doc["ranks"] if x["rank"] == rank][0]


def test_clean_machine_passes(ctx):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "acc")
        r, doc, drain = accept(ctx, out)
        e2e.check(doc["passed"] and drain == [], "a clean machine passes, nothing drained", r)
        e2e.check(doc["burnin"] is None, "no burn-in without --duration", r)
        e2e.check(len({x["node_name"] for x in doc["ranks"]}) == 2, "two emulated nodes", r)
        names = {c["name"] for c in doc["checks"]}
        for want in ("inventory", "gemm_rate", "memory_bandwidth", "link", "verification", "health",
                     "sdc_same_step", "sdc_replicas", "sdc_gemm"):
            e2e.check(want in names, "a %s check in %r" % (want, sorted(names)), r)
        for c in doc["checks"]:
            for key in ("name", "status", "measured", "expected", "source"):
                e2e.check(key in c, "check has %s: %r" % (key, c))
        gemm = [c for c in doc["checks"] if c["name"] == "gemm_rate"]
        e2e.check(len(gemm) == 4 and all(c["measured"] > 0 and c["expected"] > 0 and
                                         "system cpu" in c["source"] for c in gemm),
                  "a GEMM rate per rank against the cpu system's figure: %r" % gemm, r)
        e2e.check([s["name"] for s in doc["stages"]] == ["inventory", "gpu", "links", "step", "sdc"],
                  "the ladder's stages in order", r)
        with open(os.path.join(out, "accept.md")) as f:
            e2e.check(f.read().startswith("# Acceptance: PASS"), "the Markdown's verdict")


def test_burn_in_keeps_every_round(ctx):
    with tempfile.TemporaryDirectory() as tmp:
        r, doc, drain = accept(ctx, os.path.join(tmp, "acc"), ["--duration", "2s"])
        b = doc["burnin"]
        e2e.check(doc["passed"] and drain == [] and b["duration_s"] == 2 and b["rounds"] >= 1,
                  "a clean burn-in passes: %r" % b, r)
        e2e.check(len(b["ranks"]) == 4 and all(len(x["gemm_rate"]) == b["rounds"] and
                                              len(x["step_time_s"]) == b["rounds"]
                                              for x in b["ranks"]), "a value a round a rank", r)
        drift = [c for c in doc["checks"] if c["name"] == "burnin_gemm_drift"]
        e2e.check(len(drift) == 4, "a drift check a rank", r)
        e2e.check([s["name"] for s in doc["stages"]][-1] == "burnin", "the burn-in last", r)
        sdc = [c for c in doc["checks"] if c["name"] == "sdc_gemm" and c["rank"] is not None]
        e2e.check(all("in %d repeats" % (5 + 2 * b["rounds"]) in c["reason"] for c in sdc),
                  "every round's GEMM compared: %r" % sdc[0]["reason"], r)


def test_silent_corruption_names_its_node(ctx):
    with tempfile.TemporaryDirectory() as tmp:
        r, doc, drain = accept(ctx, os.path.join(tmp, "acc"), ["--inject", "sdc:rank=3"],
                               ACCEPTANCE)
        node = node_of(doc, 3)
        e2e.check(len(drain) == 1 and drain[0].startswith("scontrol update NodeName=%s " % node),
                  "one drain line, rank 3's node %s: %r" % (node, drain), r)
        bad = [c for c in doc["checks"] if c["name"] == "sdc_gemm" and c["status"] == "fail"]
        e2e.check(len(bad) == 1 and bad[0]["rank"] == 3, "the GEMM check names rank 3", r)
        e2e.check("moebench: accept FAIL: sdc_gemm: rank 3" in r.stderr, "stderr names it", r)


def test_slow_gpu_names_its_node(ctx):
    with tempfile.TemporaryDirectory() as tmp:
        r, doc, drain = accept(ctx, os.path.join(tmp, "acc"),
                               ["--inject", "slow:rank=1,factor=4"], ACCEPTANCE)
        node = node_of(doc, 1)
        e2e.check(len(drain) == 1 and drain[0].startswith("scontrol update NodeName=%s " % node),
                  "one drain line, rank 1's node %s: %r" % (node, drain), r)
        slow = [c for c in doc["checks"] if c["status"] == "fail"]
        e2e.check(slow and all(c["rank"] == 1 for c in slow),
                  "only rank 1's checks fail: %r" % [(c["name"], c["rank"]) for c in slow], r)
        e2e.check(any(c["name"] == "gemm_rate" for c in slow), "its GEMM rate among them", r)


def test_bad_flags_are_one_line(ctx):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "acc")
        for bad, words in ((["--floor", "2"], "--floor"), (["--sdc-repeats", "1"], "--sdc-repeats"),
                           (["--inject", "die:rank=1"], "accept injects"),
                           (["--duration", "5x"], "--duration 5x")):
            r = e2e.run_moebench(ctx, ["accept", "--out", out] + bad, timeout=60)
            e2e.check(r.rc == e2e.EXIT_USAGE and words in r.stderr and
                      len(r.stderr.strip().splitlines()) == 1, "bad %r" % bad, r)
            e2e.check(not os.path.exists(out), "nothing written for %r" % bad)


TESTS = [test_clean_machine_passes, test_burn_in_keeps_every_round,
         test_silent_corruption_names_its_node,
         test_slow_gpu_names_its_node, test_bad_flags_are_one_line]

if __name__ == "__main__":
    e2e.run_main(TESTS)
