"""Nothing measured is lost and nothing outside the output is touched (issue 45): a report never
replaces one of its own inputs, a full disk moves the report to a fallback it names, a name the
file system refuses fails before the steps, outputs are never aliased or shared between runs,
hostile layouts, figures and flags are refused in one line, and every signal a batch system or a
shell sends leaves the interrupted report.

Each case was a defect found by an attack on the tiny model; each fails on the code before it.
"""

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time

import moebench_e2e as e2e

EXIT_INTERRUPTED = 7
EXIT_ELSEWHERE = 8  # the report went to a fallback place (harness/core/error.hpp)
TINY = ["--preset", "deepseek-v3-tiny", "--warmup", "0"]


def one_line(r, what, needle):
    lines = r.moebench_lines()
    e2e.check(r.rc == e2e.EXIT_USAGE, "%s: exit %s, expected 2" % (what, r.rc), r)
    e2e.check(len(lines) == 1 and needle in lines[0], "%s: one line saying %r" % (what, needle), r)
    e2e.check(len(lines[0]) < 1000, "%s: a %d-character line" % (what, len(lines[0])), r)


def digest(path):
    with open(path, "rb") as f:
        return f.read()


def test_report_never_replaces_its_own_input(ctx):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "r1.json")
        r = e2e.run_moebench(ctx, ["run", "--quiet", "--steps", "1", "--out", out] + TINY)
        e2e.check(r.rc == 0, "the run", r)
        folder = os.path.join(tmp, "rep")
        os.mkdir(folder)
        for name in ("r1.json", "good.json", "r4.json"):
            shutil.copy(out, os.path.join(folder, name))
        good = os.path.join(folder, "good.json")
        before = digest(good)
        for flag in ("--out", "--markdown"):
            r = e2e.run_moebench(ctx, ["report", folder, "--quiet", flag, good], timeout=60)
            one_line(r, "report %s onto a run in its folder" % flag, "would overwrite it")
            e2e.check(digest(good) == before, "%s changed the run report" % flag)
        # A previous scaling report in the folder is still skipped and replaced (a study needs a
        # second GPU count).
        r = e2e.run_moebench(ctx, ["run", "--quiet", "--steps", "1", "--ep", "2", "--out",
                                   os.path.join(folder, "np2.json")] + TINY, np=2)
        e2e.check(r.rc == 0, "the 2-rank run", r)
        scaling = os.path.join(folder, "scaling.json")
        for _ in range(2):
            r = e2e.run_moebench(ctx, ["report", folder, "--quiet", "--allow-mixed", "ep",
                                       "--out", scaling], timeout=60)
            e2e.check(r.rc in (0, 4) and os.path.isfile(scaling), "report into its folder", r)


def can_mount():
    return os.geteuid() == 0 and shutil.which("mount") is not None


def test_a_full_disk_moves_the_report_elsewhere(ctx):
    """A 5 MB tmpfs (root mounts it; elsewhere the case says so and checks nothing) that fills
    after the first steps: every step still runs, the report goes to $TMPDIR and stderr names it,
    exit 8, and the step log ends in a whole line."""
    if not can_mount():
        print("  not root: no tmpfs to fill; the full-disk case did not run")
        return
    with tempfile.TemporaryDirectory() as tmp:
        disk = os.path.join(tmp, "disk")
        alt = os.path.join(tmp, "alt")
        os.mkdir(disk)
        os.mkdir(alt)
        if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=5m", "tmpfs", disk]).returncode:
            print("  mount refused here: the full-disk case did not run")
            return
        try:
            out = os.path.join(disk, "r.json")
            log = out + ".steps.jsonl"
            env = e2e.mpi_env()
            env["TMPDIR"] = alt
            cmd = [ctx.binary, "run", "--quiet", "--steps", "40", "--out", out] + TINY
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    env=env)
            end = time.monotonic() + 60
            while time.monotonic() < end and not (os.path.isfile(log) and
                                                  os.path.getsize(log) > 0):
                time.sleep(0.05)
            with open(os.path.join(disk, "fill"), "wb") as f:  # until the disk is full
                try:
                    while True:
                        f.write(b"\0" * (1 << 16))
                        f.flush()
                except OSError:
                    pass
            _, err = proc.communicate(timeout=300)
            e2e.check(proc.returncode == EXIT_ELSEWHERE,
                      "exit %s, expected %d:\n%s" % (proc.returncode, EXIT_ELSEWHERE, err))
            rescued = [n for n in os.listdir(alt) if n.endswith(".json")]
            e2e.check(len(rescued) == 1, "the fallback holds %s" % os.listdir(alt))
            where = os.path.join(alt, rescued[0])
            e2e.check("the report was written to %s instead" % where in err,
                      "stderr does not say where the report went:\n%s" % err)
            rep = e2e.load_report(ctx, where)
            e2e.check(rep["status"]["state"] == "completed" and
                      rep["status"]["steps_completed"] == 40, "the rescued report: %r" %
                      rep["status"])
            text = open(log, "rb").read()
            e2e.check(text.endswith(b"\n"), "the step log ends in a broken line: %r" % text[-80:])
            for line in text.decode().splitlines():
                json.loads(line)
            e2e.check("--step-log" in err and "No space left" in err,
                      "the step log's failure is not warned about:\n%s" % err)
        finally:
            subprocess.run(["umount", disk])


def test_a_name_too_long_fails_before_the_steps(ctx):
    """The temporary name (".tmp.HOST.PID.XXXXXX" after the file's) is tried before the steps: a
    file name the file system takes, whose temporary it does not, fails in a second."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "r" * 250)
        r = e2e.run_moebench(ctx, ["run", "--steps", "1", "--out", out] + TINY, timeout=60)
        one_line(r, "a 250-character --out", "temporary file")
        e2e.check("step 1/1" not in r.stdout, "the steps ran first", r)
        e2e.check(os.listdir(tmp) == [], "files left: %s" % os.listdir(tmp))


def test_outputs_are_never_shared(ctx):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "r.json")
        # --out as its own step log, through another spelling of the path.
        r = e2e.run_moebench(ctx, ["run", "--steps", "1", "--out", out, "--step-log",
                                   os.path.join(tmp, ".", "r.json")] + TINY, timeout=60)
        one_line(r, "--step-log equal to --out", "is also --out")
        # A step log would replace a report; a report would replace a step log.
        r = e2e.run_moebench(ctx, ["run", "--quiet", "--steps", "1", "--out", out] + TINY)
        e2e.check(r.rc == 0, "the run", r)
        before = digest(out)
        r = e2e.run_moebench(ctx, ["run", "--steps", "1", "--out", os.path.join(tmp, "b.json"),
                                   "--step-log", out] + TINY, timeout=60)
        one_line(r, "--step-log onto a report", "is not a step log")
        e2e.check(digest(out) == before, "the report was changed")
        r = e2e.run_moebench(ctx, ["run", "--steps", "1", "--out", out + ".steps.jsonl",
                                   "--step-log", os.path.join(tmp, "x.jsonl")] + TINY, timeout=60)
        one_line(r, "--out onto a step log", "is a step log")
        # Two runs, one --out: the second is refused while the first runs, and the first's
        # report and log are whole.
        shared = os.path.join(tmp, "shared.json")
        first = subprocess.Popen([ctx.binary, "run", "--quiet", "--steps", "200", "--out",
                                  shared] + TINY, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, env=e2e.mpi_env())
        lock = os.path.join(tmp, ".shared.json.lock")
        end = time.monotonic() + 60
        while time.monotonic() < end and not os.path.exists(lock):
            time.sleep(0.05)
        r = e2e.run_moebench(ctx, ["run", "--quiet", "--steps", "1", "--out", shared] + TINY)
        one_line(r, "a second run writing the same --out", "another moebench run")
        first.send_signal(signal.SIGTERM)
        first.communicate(timeout=120)
        e2e.check(first.returncode == EXIT_INTERRUPTED, "the first run: exit %s" %
                  first.returncode)
        e2e.load_report(ctx, shared)
        e2e.check(not os.path.exists(lock), "the lock file outlived its run")


def test_hostile_layouts_and_flags_are_one_line(ctx):
    nested = "(" * 50000 + "t" + ")" * 50000
    r = e2e.run_moebench(ctx, ["plan", "--preset", "deepseek-v3-tiny", "--pipeline-layout",
                               nested], timeout=60)
    one_line(r, "50,000 nested parentheses", "nested '('")
    r = e2e.run_moebench(ctx, ["plan", "--preset", "deepseek-v3-tiny", "--pipeline-layout",
                               "((t*1000)*1000)*1000"], timeout=60)
    one_line(r, "a billion-symbol layout", "longer than 10^6")
    for args, needle in ((["run", "--seed", "-1"], "not a non-negative decimal"),
                         (["run", "--out", ""], "empty file name"),
                         (["predict", "--system", "cpu", "--gpus", "0x10"], "not a decimal")):
        r = e2e.run_moebench(ctx, args + ["--preset", "deepseek-v3-tiny"], timeout=60)
        one_line(r, " ".join(args), needle)


def system_with(ctx, tmp, name, change):
    r = e2e.run_moebench(ctx, ["systems", "--json"], timeout=60)
    doc = [s for s in json.loads(r.stdout) if s["name"] == "h100-hgx"][0]
    doc["name"] = "mine"
    change(doc)
    path = os.path.join(tmp, name + ".json")
    with open(path, "w") as f:
        json.dump(doc, f)
    return path


def test_system_figures_out_of_range_are_refused(ctx):
    """A figure no system has (a unit mistake, or one that would print as inf or NaN) is refused
    naming it; a file of 200 MB is refused without being read."""
    cases = [("tiny-peak", lambda d: d["peak_dense_flops"]["bf16"].update(value=1e-300),
              "peak_dense_flops.bf16"),
             ("tflops", lambda d: d["peak_dense_flops"]["bf16"].update(value=989),
              "not TFLOP/s"),
             ("gbps", lambda d: d["nvlink_bandwidth_bytes_per_s"].update(value=450),
              "not GB/s")]
    with tempfile.TemporaryDirectory() as tmp:
        for name, change, needle in cases:
            path = system_with(ctx, tmp, name, change)
            r = e2e.run_moebench(ctx, ["predict", "--preset", "deepseek-v3-tiny", "--backend",
                                       "cuda", "--gpus", "8", "--system", path], timeout=60)
            one_line(r, name, needle)
        big = os.path.join(tmp, "big.json")
        with open(big, "w") as f:
            f.truncate(200 << 20)
        r = e2e.run_moebench(ctx, ["systems", "--system", big], timeout=60)
        one_line(r, "a 200 MB system file", "more than")


def test_every_stop_signal_leaves_the_report(ctx):
    """HUP (a closed terminal), USR1 (sbatch --signal) and a closed pipe end a run as TERM does:
    after the step in flight, with the interrupted report naming the signal, exit 7."""
    with tempfile.TemporaryDirectory() as tmp:
        for sig in (signal.SIGHUP, signal.SIGUSR1):
            out = os.path.join(tmp, "%s.json" % sig.name)
            proc = subprocess.Popen([ctx.binary, "run", "--quiet", "--steps", "400", "--out",
                                     out] + TINY, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, env=e2e.mpi_env())
            log = out + ".steps.jsonl"
            end = time.monotonic() + 60
            while time.monotonic() < end and not (os.path.isfile(log) and
                                                  os.path.getsize(log) > 0):
                time.sleep(0.05)
            proc.send_signal(sig)
            _, err = proc.communicate(timeout=120)
            e2e.check(proc.returncode == EXIT_INTERRUPTED, "%s: exit %s\n%s" % (
                sig.name, proc.returncode, err))
            st = e2e.load_report(ctx, out)["status"]
            e2e.check(st["state"] == "interrupted" and st["signal"] == sig.name,
                      "%s: status %r" % (sig.name, st))
        # Piped into a reader that stops after one line (`| grep -m1`), without mpirun.
        out = os.path.join(tmp, "pipe.json")
        proc = subprocess.Popen([ctx.binary, "run", "--steps", "400", "--out", out] + TINY,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=e2e.mpi_env())
        proc.stdout.readline()
        proc.stdout.close()
        proc.wait(timeout=120)
        err = proc.stderr.read().decode()
        e2e.check(proc.returncode == EXIT_INTERRUPTED, "a closed pipe: exit %s\n%s" % (
            proc.returncode, err))
        st = e2e.load_report(ctx, out)["status"]
        e2e.check(st["state"] == "interrupted" and st["signal"] == "SIGPIPE", "status %r" % st)


TESTS = [test_report_never_replaces_its_own_input, test_a_full_disk_moves_the_report_elsewhere,
         test_a_name_too_long_fails_before_the_steps, test_outputs_are_never_shared,
         test_hostile_layouts_and_flags_are_one_line,
         test_system_figures_out_of_range_are_refused, test_every_stop_signal_leaves_the_report]

if __name__ == "__main__":
    e2e.run_main(TESTS)
