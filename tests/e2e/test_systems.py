"""`moebench systems`: the built-in system descriptions as a table and as JSON, and a user's own
file checked (exit 2 with one line naming the field)."""

import json
import os
import tempfile

import moebench_e2e as e2e

BUILT_IN = {"h100-hgx", "h200-hgx", "h800-deepseek", "b200-hgx", "b300-hgx", "gb200-nvl72",
            "gb300-nvl72", "cpu"}


def test_lists_the_systems(ctx):
    r = e2e.run_moebench(ctx, ["systems"], timeout=30)
    e2e.check(r.rc == 0, "systems failed", r)
    rows = [line.split()[0] for line in r.stdout.splitlines()[1:] if not line.startswith("#")]
    e2e.check(set(rows) == BUILT_IN, "rows %r" % rows, r)
    r = e2e.run_moebench(ctx, ["systems", "--json"], timeout=30)
    docs = json.loads(r.stdout)
    e2e.check({d["name"] for d in docs} == BUILT_IN, "JSON names", r)
    gb300 = [d for d in docs if d["name"] == "gb300-nvl72"][0]
    e2e.check(gb300["peak_dense_flops"]["fp8"]["value"] == 4.9e15 and
              "DGX Cloud" in gb300["peak_dense_flops"]["fp8"]["source"], "GB300's FP8 peak", r)


def test_own_file(ctx):
    r = e2e.run_moebench(ctx, ["systems", "--json"], timeout=30)
    doc = [d for d in json.loads(r.stdout) if d["name"] == "h200-hgx"][0]
    with tempfile.TemporaryDirectory() as tmp:
        good = os.path.join(tmp, "site.json")
        doc["name"] = "site-h200"
        doc["scale_out_bandwidth_bytes_per_s"] = {"value": 25e9, "source": "our fabric: 200 Gb/s"}
        # The optional figures may be left out.
        host_link = doc.pop("host_link_bandwidth_bytes_per_s")
        for key in ("sm_count", "exp_per_s"):
            del doc[key]
        with open(good, "w") as f:
            json.dump(doc, f)
        r = e2e.run_moebench(ctx, ["systems", "--system", good], timeout=30)
        e2e.check(r.rc == 0 and "site-h200" in r.stdout, "the user's system is listed", r)
        negative = os.path.join(tmp, "negative.json")
        doc["host_link_bandwidth_bytes_per_s"] = dict(host_link, value=-1)
        with open(negative, "w") as f:
            json.dump(doc, f)
        bad = os.path.join(tmp, "bad.json")
        del doc["host_link_bandwidth_bytes_per_s"]
        del doc["nvls"]
        with open(bad, "w") as f:
            json.dump(doc, f)
        for path, expected in ((bad, "Missing required property 'nvls'"),
                               (negative, "/host_link_bandwidth_bytes_per_s/value"),
                               (os.path.join(tmp, "none.json"), "does not exist"),
                               (tmp, "not a regular file")):
            r = e2e.run_moebench(ctx, ["systems", "--system", path], timeout=30)
            e2e.check(r.rc == e2e.EXIT_USAGE, "%s: exit 2" % path, r)
            e2e.check(r.stderr.startswith("moebench: --system ") and expected in r.stderr and
                      len(r.stderr.strip().splitlines()) == 1, "%s: one line" % path, r)
            e2e.check(r.stdout == "", "%s: nothing on stdout" % path, r)


TESTS = [test_lists_the_systems, test_own_file]

if __name__ == "__main__":
    e2e.run_main(TESTS)
