"""`moebench accept` on the cpu backend with emulated nodes: a clean machine passes with every
output written (accept.json valid against reports/accept.schema.json, accept.md, junit.xml, an
empty drain.txt); each injected fault (a GEMM silently wrong, a slow GPU, a rank whose software
differs, a slow port, a hung rank) fails with exactly one drain line, naming that rank's node; a
SIGTERM to the ranks or to mpirun keeps the finished stages' files; bad flags are one line, exit
2, and no output. test_accept_site.py has the site's inputs (NVML, DCGM, --baseline, the
merge)."""

import os
import signal
import subprocess
import tempfile
import time

import moebench_e2e as e2e
from accept_e2e import ACCEPTANCE, accept, node_of, outputs

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


def signalled(ctx, tmp, to_ranks, extra=(), after="sdc"):
    """accept at 4 ranks with a 10-minute burn-in, SIGTERM 2 s after rank 0 has said stage
    `after` is done (sdc: into the burn-in): to every rank (`to_ranks`) or to mpirun alone. The
    result, once the job ended, with its four files checked (one `interrupted` failure, the
    stages that finished before it kept), and drain.txt's lines."""
    out = os.path.join(tmp, "acc")
    cmd = ["mpirun", "-np", "4", "--oversubscribe", ctx.binary, "accept", "--system", "cpu",
           "--ranks-per-node", "2", "--out", out, "--duration", "10m"] + list(extra)
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=e2e.mpi_env(), start_new_session=True)
    head = []
    for line in proc.stdout:  # rank 0's progress lines, until the stage is done
        head.append(line)
        if line.startswith("# accept: %s done" % after) or time.monotonic() - start > 400:
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
    e2e.check(any(x.startswith("# accept: %s done" % after) for x in head),
              "stage %s done before the signal" % after, r)
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
        r, doc, drain = signalled(ctx, tmp, to_ranks=True)
        e2e.check(r.rc == 7, "exit 7", r)
        e2e.check(drain == [], "a signal drains no node", r)
        # Agreed after a round, the burn-in's finished rounds are judged; a wait still blocked
        # when the signal came wrote the files at once, the burn-in stage marked stopped.
        names = [s["name"] for s in doc["stages"]]
        if "burnin" in names and not doc["stages"][-1].get("stopped", False):
            e2e.check(doc["burnin"]["rounds"] >= 1, "the burn-in's finished rounds kept", r)


def test_sigterm_to_mpirun_keeps_the_finished_stages(ctx):
    """SIGTERM to mpirun alone (a user's `kill`, a launcher that signals mpirun rather than the
    tasks): mpirun forwards it and kills its ranks about a second later, whatever they are doing.
    Rank 0 is hung at the step stage's first step (--inject hang:rank=0: asleep, not in a wait,
    so the stopped-wait hook cannot run): only rank 0's watch, within a poll of the signal,
    writes the four files, with the finished stages' checks, the step stage marked stopped and
    the `interrupted` failure; without the watch no file was written."""
    with tempfile.TemporaryDirectory() as tmp:
        r, doc, drain = signalled(ctx, tmp, to_ranks=False, extra=["--inject", "hang:rank=0"],
                                  after="collectives")
        e2e.check(drain == [], "a signal drains no node", r)
        stages = [(x["name"], x.get("stopped", False)) for x in doc["stages"]]
        e2e.check(stages == [("inventory", False), ("gpu", False), ("links", False),
                             ("collectives", False), ("step", True)],
                  "the finished stages kept, the step in flight marked stopped: %r" % stages, r)


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


TESTS = [test_clean_machine_passes, test_burn_in_keeps_every_round,
         test_silent_corruption_names_its_node,
         test_slow_gpu_names_its_node, test_version_and_slow_port_name_their_node,
         test_hang_names_its_node, test_sigterm_keeps_the_finished_stages,
         test_sigterm_to_mpirun_keeps_the_finished_stages, test_bad_flags_are_one_line]

if __name__ == "__main__":
    e2e.run_main(TESTS)
