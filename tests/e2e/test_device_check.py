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


# The GPU check's steps in the order of their figures' value, each with its limit (check.sh's
# limit_of; tests/device/README.md's table), as the dry run's log must list them.
GPU_SCHEDULE = [("plan", 30), ("cudnn_graphs", 60), ("run_1gpu", 90), ("bench", 150),
                ("gpu_tests", 150), ("run_1gpu_fp8_blockwise", 60), ("run_1gpu_fp8", 60),
                ("bench_fp8", 120), ("run_4rank", 90), ("gpu_comm_tests", 90),
                ("run_1gpu_nccl", 60), ("run_4rank_pp", 120)]


def logged_schedule(log, title):
    """The (step, limit) lines of the schedule block `title` in check.log."""
    rows, inside = [], False
    for line in log.splitlines():
        if title in line:
            inside = True
            continue
        if inside:
            if "  " not in line.split("] ", 1)[-1][:3]:
                break
            name, rest = line.split("] ", 1)[1].strip().split(": limit ")
            rows.append((name, int(rest.split(" s")[0])))
    return rows


def test_schedule_and_cudnn_off_the_loader_path(ctx):
    """The dry run's log lists the GPU check's steps in order with their limits (a deadline long
    enough that none is clamped); and with cuDNN's folder off the loader's path (the
    lonelycudnn testing aid: libcudnn.so.9 alone, the loader's cache off, as from a wheel without
    RUNPATH) the cudnn_graphs step fails and the summary names the loader's complaint, where this
    build has cuDNN's graph check at all."""
    has_cudnn = os.path.isfile(os.path.join(os.path.dirname(ctx.binary), "tests",
                                            "cudnn_attention_tests"))
    with tempfile.TemporaryDirectory() as tmp:
        proc, out = start(ctx, tmp, 2000,
                          force="lonelycudnn:cudnn_graphs" if has_cudnn else "")
        text = finish(proc, 600)
        summary = summary_of(out, text)
        with open(os.path.join(out, "check.log"), errors="replace") as f:
            log = f.read()
        got = logged_schedule(log, "schedule on the GPU machine")
        e2e.check(got == GPU_SCHEDULE, "the GPU schedule in the log: %s" % got)
        e2e.check(summary["runs"]["run-4rank-pp"]["verification_passed"] is True,
                  "the pipeline run's flags on the tiny model: %s" % summary["runs"].get(
                      "run-4rank-pp"))
        if has_cudnn:
            e2e.check(step(summary, "cudnn_graphs")["status"] == "failed",
                      "cudnn_graphs without cuDNN's engines: %s" % step(summary, "cudnn_graphs"))
            why = summary["cudnn"]["load_error"] or ""
            e2e.check("Cannot load symbol" in why or "Unable to load" in why,
                      "the summary does not say why cuDNN failed: %s" % summary["cudnn"])
        check_files(out, summary)


def test_refuses_what_it_cannot_use(ctx):
    """An $OUT that is a regular file is refused in one line before anything is touched: every
    `rm` the check would run is traced by an `rm` of the test's own, first on PATH, which records
    its arguments and removes nothing. Malformed limits and deadlines are refused with a summary
    saying why, and exit 2."""
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "rm.trace")
        fake = os.path.join(tmp, "bin")
        os.mkdir(fake)
        with open(os.path.join(fake, "rm"), "w") as f:
            f.write('#!/bin/sh\nprintf "%%s\\n" "$*" >>%s\n' % trace)
        os.chmod(os.path.join(fake, "rm"), 0o755)
        out_file = os.path.join(tmp, "out-is-a-file")
        with open(out_file, "w") as f:
            f.write("keep me\n")
        env = e2e.mpi_env()
        env.update(CHECK_SH_CPU_ONLY="1", CHECK_SH_PREBUILT=os.path.dirname(ctx.binary),
                   CHECK_SH_WORK=os.path.join(tmp, "work"),
                   PATH=fake + os.pathsep + env.get("PATH", ""))
        r = subprocess.run(["bash", check_sh(ctx), out_file], env=env, capture_output=True,
                           text=True, timeout=60)
        e2e.check(r.returncode == 2, "exit %s for a file as $OUT:\n%s" % (r.returncode, r.stderr))
        lines = [l for l in r.stderr.splitlines() if l.strip()]
        e2e.check(len(lines) == 1 and "is not a folder" in lines[0], "one line: %r" % lines)
        e2e.check(not os.path.exists(trace), "it removed something: %s" % (
            open(trace).read() if os.path.exists(trace) else ""))
        e2e.check(open(out_file).read() == "keep me\n", "the file given as $OUT was changed")
        e2e.check(sorted(os.listdir(tmp)) == ["bin", "out-is-a-file"],
                  "it made something beside the file: %s" % os.listdir(tmp))
        for name, value, needle in (("CHECK_SH_LIMITS", "plan=5m", "plan=5m"),
                                    ("CHECK_SH_LIMITS", "abc", "'abc' is not STEP=SECONDS"),
                                    ("CHECK_SH_LIMITS", "plan=0", "at least 1 s"),
                                    ("CHECK_SH_DEADLINE_S", "abc", "whole number"),
                                    ("CHECK_SH_DEADLINE_S", "1e3", "whole number")):
            out = os.path.join(tmp, "out-%s-%s" % (name, value))
            bad = dict(env, **{name: value})
            bad["PATH"] = e2e.mpi_env().get("PATH", "")
            r = subprocess.run(["bash", check_sh(ctx), out], env=bad, capture_output=True,
                               text=True, timeout=120)
            e2e.check(r.returncode == 2 and needle in r.stderr,
                      "%s=%s: exit %s, %s" % (name, value, r.returncode, r.stderr[-500:]))
            summary = summary_of(out, r.stdout + r.stderr)
            e2e.check((summary["stopped_by"] or "").startswith("bad input") and
                      needle in summary["stopped_by"] and not summary["passed"],
                      "%s=%s: the summary: %s" % (name, value, summary["stopped_by"]))


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
                  test_deadline_clamps_a_hung_step, test_schedule_and_cudnn_off_the_loader_path,
                  test_refuses_what_it_cannot_use])
