"""`moebench accept` on the cpu backend with emulated nodes: a clean machine passes with every
output written (accept.json valid against reports/accept.schema.json, accept.md, junit.xml, an
empty drain.txt); each injected fault (a GEMM silently wrong, a slow GPU, a rank whose software
differs, a slow port, a hung rank) fails with exactly one drain line, naming that rank's node; a
uniformly slow rack fails against a known-good node's report (--baseline); DCGM's results name
their node (--dcgm); a GPU in thermal slowdown through the burn-in names its node (the NVML
stand-in's telemetry); accept-merge joins per-node reports into one verdict, naming the node whose
job wrote none; bad flags are one line, exit 2, and no output."""

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
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


def test_clean_machine_passes(ctx):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "acc")
        r, doc, drain = accept(ctx, out)
        e2e.check(doc["passed"] and drain == [], "a clean machine passes, nothing drained", r)
        e2e.check(doc["burnin"] is None, "no burn-in without --duration", r)
        e2e.check(len({x["node_name"] for x in doc["ranks"]}) == 2, "two emulated nodes", r)
        names = {c["name"] for c in doc["checks"]}
        for want in ("inventory", "gemm_rate", "grouped_gemm_rate", "attention_rate",
                     "memory_bandwidth", "link",
                     "collective_busbw", "collective_transport",
                     "verification", "health", "sdc_same_step", "sdc_replicas", "sdc_gemm"):
            e2e.check(want in names, "a %s check in %r" % (want, sorted(names)), r)
        for c in doc["checks"]:
            for key in ("name", "status", "measured", "expected", "source"):
                e2e.check(key in c, "check has %s: %r" % (key, c))
        gemm = [c for c in doc["checks"] if c["name"] == "gemm_rate"]
        e2e.check(len(gemm) == 4 and all(c["measured"] > 0 and c["expected"] > 0 and
                                         "system cpu" in c["source"] for c in gemm),
                  "a GEMM rate per rank against the cpu system's figure: %r" % gemm, r)
        e2e.check([s["name"] for s in doc["stages"]] ==
                  ["inventory", "gpu", "links", "collectives", "step", "sdc"],
                  "the ladder's stages in order", r)
        rows = doc["collectives"]
        e2e.check(len(rows) == 8 and {x["op"] for x in rows} ==
                  {"all_reduce", "reduce_scatter", "all_gather", "all_to_all"} and
                  all(x["busbw"] > 0 for x in rows), "4 collectives at 2 sizes: %r" % rows, r)
        # nccl-tests' bus bandwidth: algbw x 2(n-1)/n for an all-reduce of 4 ranks, exact.
        e2e.check(all(abs(x["busbw"] - x["algbw"] * (1.5 if x["op"] == "all_reduce" else 0.75))
                      <= 1e-9 * x["busbw"] for x in rows), "busbw from algbw", r)
        e2e.check("#   all_reduce " in r.stdout, "the table printed", r)
        # The cpu backend's collectives run over MPI: NCCL's transports, not known, fail nothing.
        transport = [c for c in doc["checks"] if c["name"] == "collective_transport"]
        e2e.check(len(transport) == 1 and transport[0]["status"] == "info" and
                  "over MPI, not NCCL" in transport[0]["reason"] and
                  all("nccl_transports" not in x for x in doc["ranks"]),
                  "one info check on the transports: %r" % transport, r)
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
        # With no NVML, no rank's telemetry and the reason; with NVML (a GPU machine), every
        # rank's.
        no_telemetry = [x["telemetry"] is None for x in b["ranks"]]
        e2e.check(all(no_telemetry) == (b["telemetry_note"] is not None) and
                  len(set(no_telemetry)) == 1, "telemetry from every rank or none: %r" % b, r)
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


def test_version_and_slow_port_name_their_node(ctx):
    """A rank whose software differs (--inject version:rank=2) fails the inventory; a rank whose
    every link is slow (slowlink:a=4,b=all: a slow port, on 2 nodes of 3 ranks, so that its
    links are a minority of each class) fails the link stage. Each drains its node alone."""
    with tempfile.TemporaryDirectory() as tmp:
        r, doc, drain = accept(ctx, os.path.join(tmp, "v"), ["--inject", "version:rank=2"],
                               ACCEPTANCE)
        bad = [(c["name"], c["rank"]) for c in doc["checks"] if c["status"] == "fail"]
        e2e.check(bad == [("inventory", 2)], "the inventory names rank 2 alone: %r" % bad, r)
        e2e.check(len(drain) == 1 and "NodeName=%s " % node_of(doc, 2) in drain[0],
                  "rank 2's node drained: %r" % drain, r)
        r, doc, drain = accept(ctx, os.path.join(tmp, "l"),
                               ["--inject", "slowlink:a=4,b=all,factor=20"], ACCEPTANCE, np=6,
                               per_node=3)
        bad = [(c["name"], c["rank"]) for c in doc["checks"] if c["status"] == "fail"]
        e2e.check(bad == [("link", 4)], "the link stage names rank 4 alone: %r" % bad, r)
        e2e.check(len(drain) == 1 and "NodeName=%s " % node_of(doc, 4) in drain[0],
                  "rank 4's node drained: %r" % drain, r)


def test_hang_names_its_node(ctx):
    """A rank that stops in the step stage (--inject hang:rank=3): the others wait past --timeout
    (5 s), rank 0 asks who still answers, writes what the finished stages found with rank 3's
    `responsive` failure, and ends the job with exit 9: one drain line, rank 3's node."""
    with tempfile.TemporaryDirectory() as tmp:
        r, doc, drain = accept(ctx, os.path.join(tmp, "acc"),
                               ["--inject", "hang:rank=3", "--timeout", 5], ACCEPTANCE)
        bad = [(c["name"], c["rank"]) for c in doc["checks"] if c["status"] == "fail"]
        e2e.check(bad == [("responsive", 3)], "rank 3 alone is named: %r" % bad, r)
        e2e.check(len(drain) == 1 and "NodeName=%s " % node_of(doc, 3) in drain[0],
                  "rank 3's node drained: %r" % drain, r)
        e2e.check([(s["name"], s.get("stopped", False)) for s in doc["stages"]] ==
                  [("inventory", False), ("gpu", False), ("links", False),
                   ("collectives", False), ("step", True)],
                  "the finished stages kept, the step stage stopped: %r" % doc["stages"], r)
        e2e.check(any(c["name"] == "gemm_rate" for c in doc["checks"]),
                  "the GPU stage's checks kept", r)


def signalled_burn_in(ctx, tmp, to_ranks, extra=()):
    """A 10-minute burn-in at 4 ranks, SIGTERM 2 s into it (once rank 0 has said the stage before
    it, sdc, is done): to every rank (`to_ranks`) or to mpirun alone. The result, once the job
    ended, with its four files checked (one `interrupted` failure, the stages that finished
    before it kept), and drain.txt's lines."""
    out = os.path.join(tmp, "acc")
    cmd = ["mpirun", "-np", "4", "--oversubscribe", ctx.binary, "accept", "--system", "cpu",
           "--ranks-per-node", "2", "--out", out, "--duration", "10m"] + list(extra)
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=e2e.mpi_env(), start_new_session=True)
    head = []
    for line in proc.stdout:  # rank 0's progress lines, until the burn-in starts
        head.append(line)
        if line.startswith("# accept: sdc done") or time.monotonic() - start > 400:
            break
    time.sleep(2)
    ranks = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True,
                           text=True).stdout.split()
    for pid in ranks if to_ranks else [proc.pid]:
        os.kill(int(pid), signal.SIGTERM)
    try:
        stdout, stderr = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
    r = e2e.Result(cmd, proc.returncode, "".join(head) + stdout, stderr,
                   time.monotonic() - start, False)
    e2e.check(any(x.startswith("# accept: sdc done") for x in head),
              "the burn-in started before the signal", r)
    e2e.check(len(ranks) == 4, "four ranks running: %r" % ranks, r)
    e2e.check(r.rc != 0, "a failing exit", r)
    doc, drain = outputs(ctx, out, r)
    stopped = [c for c in doc["checks"] if c["name"] == "interrupted"]
    e2e.check(len(stopped) == 1 and stopped[0]["status"] == "fail" and
              "SIGTERM arrived " in stopped[0]["reason"] and not doc["passed"],
              "one interrupted failure: %r" % stopped, r)
    names = [s["name"] for s in doc["stages"]]
    e2e.check(names[:2] == ["inventory", "gpu"], "the finished stages kept: %r" % names, r)
    return r, doc, drain


def test_sigterm_keeps_the_finished_stages(ctx):
    """SIGTERM to every rank 2 s into a 10-minute burn-in, as Slurm's time limit or scancel sends
    it (to the tasks, then SIGKILL only after its KillWait): the ranks agree on it after the stage
    or burn-in round in flight, rank 0 writes the four files with every finished stage's checks
    and an `interrupted` failure, and the job ends with exit 7, long before the burn-in would."""
    with tempfile.TemporaryDirectory() as tmp:
        r, doc, drain = signalled_burn_in(ctx, tmp, to_ranks=True)
        e2e.check(r.rc == 7, "exit 7", r)
        e2e.check(drain == [], "a signal drains no node", r)
        # Agreed after a round, the burn-in's finished rounds are judged; a wait still blocked
        # when the signal came wrote the files at once, the burn-in stage marked stopped.
        names = [s["name"] for s in doc["stages"]]
        if "burnin" in names and not doc["stages"][-1].get("stopped", False):
            e2e.check(doc["burnin"]["rounds"] >= 1, "the burn-in's finished rounds kept", r)


def test_sigterm_to_mpirun_keeps_the_finished_stages(ctx):
    """SIGTERM to mpirun alone (a user's `kill`, a batch system that signals the launcher): mpirun
    forwards it and kills its ranks about a second later, before a burn-in round can end on a
    loaded machine. Rank 0's watch writes the four files within a poll of the signal, so the
    finished stages' checks and the `interrupted` failure are there whatever the exit code. Rank
    0's GEMMs 100x slow keep it computing, not waiting, for seconds after the signal (the
    stopped-wait hook cannot run): without the watch, no file would be written (it was so before
    it). The slow rank's node is drained for its GEMM rate, found before the signal."""
    with tempfile.TemporaryDirectory() as tmp:
        r, doc, drain = signalled_burn_in(ctx, tmp, to_ranks=False,
                                          extra=["--inject", "slow:rank=0,factor=100,work=gemm"])
        e2e.check(len(drain) == 1 and "NodeName=%s " % node_of(doc, 0) in drain[0] and
                  "gemm_rate rank 0" in drain[0], "the slow rank's node alone: %r" % drain, r)
        stages = doc["stages"]
        e2e.check(stages[-1]["name"] == "burnin" and stages[-1]["stopped"],
                  "the burn-in, in flight, marked stopped: %r" % stages, r)


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


def test_bad_flags_are_one_line(ctx):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "acc")
        for bad, words in ((["--floor", "2"], "--floor"), (["--sdc-repeats", "1"], "--sdc-repeats"),
                           (["--inject", "die:rank=1"], "accept injects"),
                           (["--duration", "5x"], "--duration 5x"),
                           (["--floors", "/nonexistent.json"], "does not exist; give --floors"),
                           (["--floors", "a.json", "--baseline", "b.json"], "give one")):
            r = e2e.run_moebench(ctx, ["accept", "--out", out] + bad, timeout=60)
            e2e.check(r.rc == e2e.EXIT_USAGE and words in r.stderr and
                      len(r.stderr.strip().splitlines()) == 1, "bad %r" % bad, r)
            e2e.check(not os.path.exists(out), "nothing written for %r" % bad)


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


TESTS = [test_clean_machine_passes, test_burn_in_keeps_every_round,
         test_silent_corruption_names_its_node,
         test_slow_gpu_names_its_node, test_version_and_slow_port_name_their_node,
         test_hang_names_its_node, test_sigterm_keeps_the_finished_stages,
         test_sigterm_to_mpirun_keeps_the_finished_stages,
         test_nvml_inventory_names_its_node, test_burn_in_telemetry_names_a_hot_gpu,
         test_bad_flags_are_one_line,
         test_baseline_fails_a_uniformly_slow_rack, test_dcgm_results_name_their_node,
         test_merge_names_the_nodes_to_drain]

if __name__ == "__main__":
    e2e.run_main(TESTS)
