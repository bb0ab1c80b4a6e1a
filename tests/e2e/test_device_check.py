"""tests/device/check.sh's orchestration, as a dry run on this machine's own build.

The device machine gives one call of at most 600 s and returns at most 8 files of at most 16 MiB:
the check must end by its deadline whatever a step does, record a step that hangs or fails and go
on, write its summary on TERM, and leave only what can come back. Here check.sh runs with
CHECK_SH_CPU_ONLY=1 and CHECK_SH_PREBUILT (this build's moebench and tests, the system's mpirun:
no unpack, configure or build), the runs on the cpu backend; CHECK_SH_FORCE makes chosen steps
hang or fail and CHECK_SH_LIMITS shortens a hung step's limit. The plan step checks the GPU runs'
real flags (tests/device/deepseek-v3-device.json) and the cudnn_graphs step runs cuDNN's graph
validation where this build has it.
"""

import json
import os
import signal
import subprocess
import tarfile
import tempfile
import time

import moebench_e2e as e2e

MAX_FILES = 8  # what the device call returns (tests/device/README.md)
MAX_FILE_BYTES = 16 << 20
# Only what the summary says it writes: the summary, the log and one archive of the reports.
OUT_FILES = ["check.log", "results.tar.gz", "summary.json"]
# The check's own margin past its deadline: a step's limit is clamped to the deadline less 15 s
# for the summary, and `timeout` kills a step 10 s after its TERM at the latest.
DEADLINE_SLACK_S = 15


def check_sh(ctx):
    return os.path.join(ctx.repo, "tests", "device", "check.sh")


def start(ctx, tmp, deadline_s, force="", limits=""):
    env = e2e.mpi_env()
    env.update(CHECK_SH_CPU_ONLY="1", CHECK_SH_PREBUILT=os.path.dirname(ctx.binary),
               CHECK_SH_WORK=os.path.join(tmp, "work"), CHECK_SH_DEADLINE_S=str(deadline_s),
               CHECK_SH_FORCE=force, CHECK_SH_LIMITS=limits)
    out = os.path.join(tmp, "out")
    proc = subprocess.Popen(["bash", check_sh(ctx), out], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, env=env, start_new_session=True, text=True)
    return proc, out


def finish(proc, timeout):
    try:
        text, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        text, _ = proc.communicate()
        e2e.check(False, "check.sh did not end within %d s:\n%s" % (timeout, text[-3000:]))
    return text


def summary_of(out, text):
    path = os.path.join(out, "summary.json")
    e2e.check(os.path.isfile(path), "no summary.json in %s:\n%s" % (out, text[-3000:]))
    with open(path) as f:
        return json.load(f)


def check_files(out, summary):
    """At most 8 files, none over 16 MiB, and exactly the three the check writes."""
    names = sorted(os.listdir(out))
    sizes = {n: os.path.getsize(os.path.join(out, n)) for n in names}
    e2e.check(len(names) <= MAX_FILES, "%d files in $OUT: %s" % (len(names), names))
    e2e.check(max(sizes.values()) <= MAX_FILE_BYTES, "a file over 16 MiB: %s" % sizes)
    e2e.check(names == OUT_FILES, "$OUT holds %s, not %s" % (names, OUT_FILES))
    e2e.check(summary["within_device_limits"], "the summary says the files are beyond the limits")
    listed = sorted(f["name"] for f in summary["files"])
    e2e.check(listed == OUT_FILES, "the summary lists %s" % listed)


def step(summary, name):
    for s in summary["steps"]:
        if s["name"] == name:
            return s
    e2e.check(False, "no step %s in %s" % (name, [s["name"] for s in summary["steps"]]))


def no_forced_hang_left():
    """The forced hang (`sleep 100000`) was ended with its step."""
    left = []
    for pid in os.listdir("/proc"):
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                if f.read().split(b"\0")[:2] == [b"sleep", b"100000"]:
                    left.append(pid)
        except (OSError, ValueError):
            continue
    e2e.check(not left, "a hung step outlived the check: pids %s" % left)


def test_hang_and_failure_recorded_and_the_rest_run(ctx):
    deadline = 240
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.monotonic()
        proc, out = start(ctx, tmp, deadline, force="fail:unit_tests,hang:run_4rank_pp",
                          limits="run_4rank_pp=6")
        text = finish(proc, deadline + DEADLINE_SLACK_S + 30)
        wall = time.monotonic() - t0
        e2e.check(wall <= deadline + DEADLINE_SLACK_S, "it took %.0f s of a %d s deadline" % (
            wall, deadline))
        e2e.check(proc.returncode == 1, "exit %s, expected 1 (steps failed):\n%s" % (
            proc.returncode, text[-3000:]))
        summary = summary_of(out, text)
        e2e.check(summary["state"] == "complete" and summary["stopped_by"] is None,
                  "every step after the hang still ran: %s, %s" % (
                      summary["state"], summary["unfinished_steps"]))
        e2e.check(not summary["passed"], "a check with a failed step passed")
        e2e.check(sorted(summary["failed_steps"]) == ["run_4rank_pp", "unit_tests"],
                  "failed steps %s" % summary["failed_steps"])
        e2e.check(step(summary, "unit_tests")["status"] == "failed", "unit_tests not failed")
        hung = step(summary, "run_4rank_pp")
        e2e.check(hung["status"] == "timeout" and hung["limit_s"] == 6,
                  "the hung step: %s" % hung)
        for name in ("plan", "run_1gpu", "bench", "run_4rank"):
            e2e.check(step(summary, name)["status"] == "passed", "%s: %s\n%s" % (
                name, step(summary, name), text[-3000:]))
        cudnn = step(summary, "cudnn_graphs")
        e2e.check(cudnn["status"] in ("passed", "skipped"), "cudnn_graphs: %s" % cudnn)
        e2e.check(summary["runs"]["run-1gpu"]["verification_passed"] is True,
                  "run-1gpu's verification: %s" % summary["runs"]["run-1gpu"])
        e2e.check(summary["bench"] and "error" not in summary["bench"], "bench: %s" %
                  summary["bench"])
        check_files(out, summary)
        with tarfile.open(os.path.join(out, "results.tar.gz")) as tar:
            members = sorted(tar.getnames())
        for name in ("results/run-1gpu.json", "results/run-4rank.json", "results/bench.json"):
            e2e.check(name in members, "%s not in the archive: %s" % (name, members))
        for needle in ("unit_tests", "run_4rank_pp", "timeout", "FAILED"):
            e2e.check(needle in text, "the printed table lacks %r:\n%s" % (needle, text[-2000:]))
        no_forced_hang_left()


def wait_for(path, needle, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if os.path.isfile(path) and needle in open(path, errors="replace").read():
            return True
        time.sleep(0.2)
    return False


def test_term_writes_the_summary(ctx):
    with tempfile.TemporaryDirectory() as tmp:
        proc, out = start(ctx, tmp, 300, force="hang:run_1gpu")
        started = wait_for(os.path.join(out, "check.log"), "step run_1gpu (limit", 60)
        if not started:
            os.killpg(proc.pid, signal.SIGKILL)
        e2e.check(started, "run_1gpu never started")
        t_term = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        text = finish(proc, 60)
        e2e.check(time.monotonic() - t_term < 30, "the summary took %.0f s after the TERM" % (
            time.monotonic() - t_term))
        e2e.check(proc.returncode == 143, "exit %s after a TERM, expected 143" % proc.returncode)
        summary = summary_of(out, text)
        e2e.check(summary["state"] == "stopped" and summary["stopped_by"] == "SIGTERM",
                  "%s, stopped by %s" % (summary["state"], summary["stopped_by"]))
        for name in ("run_1gpu", "bench", "run_4rank_pp"):
            e2e.check(name in summary["unfinished_steps"], "%s not named unfinished: %s" % (
                name, summary["unfinished_steps"]))
        e2e.check(step(summary, "plan")["status"] == "passed", "plan: %s" % step(summary, "plan"))
        check_files(out, summary)
        no_forced_hang_left()


def test_deadline_clamps_a_hung_step(ctx):
    deadline = 30
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.monotonic()
        proc, out = start(ctx, tmp, deadline, force="hang:run_1gpu")
        text = finish(proc, deadline + DEADLINE_SLACK_S + 30)
        wall = time.monotonic() - t0
        e2e.check(wall <= deadline + DEADLINE_SLACK_S, "it took %.0f s of a %d s deadline" % (
            wall, deadline))
        summary = summary_of(out, text)
        e2e.check(summary["state"] == "stopped" and summary["stopped_by"] == "deadline",
                  "%s, stopped by %s" % (summary["state"], summary["stopped_by"]))
        hung = step(summary, "run_1gpu")
        e2e.check(hung["status"] == "timeout" and hung["limit_s"] < deadline,
                  "the hung step's limit was not clamped to the deadline: %s" % hung)
        e2e.check("bench" in summary["unfinished_steps"], "bench not named unfinished: %s" %
                  summary["unfinished_steps"])
        check_files(out, summary)
        no_forced_hang_left()


if __name__ == "__main__":
    e2e.run_main([test_hang_and_failure_recorded_and_the_rest_run, test_term_writes_the_summary,
                  test_deadline_clamps_a_hung_step])
