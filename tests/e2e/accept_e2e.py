"""What the `moebench accept` e2e tests share: running accept at 4 ranks on 2 emulated nodes, its
four files read and checked (accept.json against reports/accept.schema.json, drain.txt its drain,
one JUnit test case a check), and the NVML stand-in the tests build."""

import contextlib
import json
import os
import xml.etree.ElementTree as ET

import moebench_e2e as e2e

ACCEPTANCE = 9  # a check failed
FILES = ("accept.json", "accept.md", "junit.xml", "drain.txt")


def validator(ctx):
    import jsonschema  # imported here so a missing module fails a test, not the whole file

    with open(os.path.join(ctx.repo, "reports", "accept.schema.json")) as f:
        return jsonschema.Draft7Validator(json.load(f))


def accept(ctx, out, extra=(), rc=0, np=4, per_node=2):
    r = e2e.run_moebench(ctx, ["accept", "--system", "cpu", "--ranks-per-node", per_node, "--out",
                               out] + list(extra), np=np, timeout=300)
    e2e.check(r.rc == rc, "accept %s: exit %d" % (" ".join(map(str, extra)), rc), r)
    doc, drain = outputs(ctx, out, r)
    return r, doc, drain


def outputs(ctx, out, r):
    """The four files of `out`, checked: accept.json valid, drain.txt its drain, one JUnit test
    case a check and one failure a failed check."""
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
    return doc, drain


def node_of(doc, rank):
    return [x["node_name"] for x in doc["ranks"] if x["rank"] == rank][0]


@contextlib.contextmanager
def fake_nvml(ctx):
    """The NVML stand-in the tests build (tests/fake_nvml) first in LD_LIBRARY_PATH, and the
    environment as it was afterwards (MOEBENCH_FAKE_NVML included)."""
    fake = os.path.join(os.path.dirname(os.path.abspath(ctx.binary)), "tests", "fake_nvml")
    e2e.check(os.path.isfile(os.path.join(fake, "libnvidia-ml.so.1")), "the NVML stand-in built")
    saved = dict(os.environ)
    os.environ["LD_LIBRARY_PATH"] = fake + ":" + saved.get("LD_LIBRARY_PATH", "")
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)
