"""Shared helpers for moebench's end-to-end tests.

Each tests/e2e/test_*.py runs the real binary (under mpirun where ranks matter) with the tiny
preset and checks what it wrote. ctest runs them as
    python3 tests/e2e/test_X.py --binary <moebench> --repo <source dir>
and a test file ends with "N passed, M failed" and a non-zero exit status when anything failed.
Only the standard library and jsonschema are used.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import traceback

# Every phase the report must list: the binary's own table (`moebench phases --json`, from
# harness/measure/phases.hpp), read when the Context is made.
PHASE_NAMES = []

# Exit codes (harness/core/error.hpp).
EXIT_OK, EXIT_RUNTIME, EXIT_USAGE, EXIT_VERIFICATION = 0, 1, 2, 3


class Context:
    """What every test needs: the binary, the source tree and its test data folder."""

    def __init__(self, binary, repo):
        self.binary = os.path.abspath(binary)
        self.repo = os.path.abspath(repo)
        self.test_data = os.path.join(self.repo, "tests", "data")
        self.schema_path = os.path.join(self.repo, "reports", "run.schema.json")
        self._schema = None
        global PHASE_NAMES
        out = subprocess.run([self.binary, "phases", "--json"], check=True, capture_output=True,
                             text=True, timeout=60).stdout
        PHASE_NAMES = [p["name"] for p in json.loads(out)["phases"]]

    @property
    def dsv3_config(self):
        return os.path.join(self.test_data, "deepseek-v3.config.json")

    def schema(self):
        if self._schema is None:
            with open(self.schema_path) as f:
                self._schema = json.load(f)
        return self._schema


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--binary", required=True, help="path to the moebench executable")
    p.add_argument("--repo", required=True, help="moebench source directory")
    p.add_argument("-k", dest="filter", default="", help="run only tests whose name contains this")
    return p.parse_args(argv)


# Warnings about the machine a test runs on rather than about what the test does: OpenBLAS's
# generic kernels, which a user (or CI, to prove the worst case) may ask for with
# OPENBLAS_CORETYPE=Prescott. A test that counts stderr lines counts the lines it is about
# (Result.messages); test_bench.py tests this warning itself.
ENVIRONMENT_WARNINGS = ("moebench: warning: OpenBLAS runs its ",)


class Result:
    def __init__(self, cmd, rc, stdout, stderr, wall_s, timed_out):
        self.cmd = cmd
        self.rc = rc
        self.stdout = stdout
        self.stderr = stderr
        self.wall_s = wall_s
        self.timed_out = timed_out

    @property
    def messages(self):
        """stderr's lines without the environment's warnings (ENVIRONMENT_WARNINGS)."""
        return [l for l in self.stderr.splitlines() if not l.startswith(ENVIRONMENT_WARNINGS)]

    def moebench_lines(self, prefix="moebench:"):
        """moebench's own lines about the test (not mpirun's banners, not the environment's)."""
        return [l for l in self.messages if l.startswith(prefix)]

    def describe(self):
        return ("command: %s\nexit: %s%s (%.1f s)\n--- stdout (tail) ---\n%s\n"
                "--- stderr (tail) ---\n%s") % (
            " ".join(self.cmd), self.rc, " TIMED OUT" if self.timed_out else "", self.wall_s,
            self.stdout[-3000:], self.stderr[-3000:])


def mpi_env():
    env = dict(os.environ)
    if os.geteuid() == 0:
        env["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
        env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    # One process per core is not possible on a small machine; the tests oversubscribe.
    env["OMPI_MCA_rmaps_base_oversubscribe"] = "1"
    return env


def _run_cmd(cmd, timeout, cwd):
    """Runs cmd in its own session so a hung launcher and its ranks can be ended together."""
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd,
                            env=mpi_env(), start_new_session=True, text=True)
    timed_out = False
    out, err = "", ""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        # mpirun forwards SIGTERM to its ranks; whatever is left of the group is then killed.
        for sig, grace in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                out, err = proc.communicate(timeout=grace)
                break
            except subprocess.TimeoutExpired:
                continue
    return Result(cmd, proc.returncode, out or "", err or "", time.monotonic() - start, timed_out)


def run_moebench(ctx, args, np=None, timeout=120, cwd=None):
    """Runs `moebench args...`, under `mpirun -np np --oversubscribe` when np is given."""
    cmd = [ctx.binary] + [str(a) for a in args]
    if np is not None:
        cmd = ["mpirun", "-np", str(np), "--oversubscribe"] + cmd
    return _run_cmd(cmd, timeout, cwd)


class TestFailure(AssertionError):
    pass


def check(cond, message, result=None):
    """Fails the current test with message (and the command's output when given)."""
    if not cond:
        raise TestFailure(message + ("\n" + result.describe() if result is not None else ""))


def check_close(actual, expected, rel, message):
    ok = abs(actual - expected) <= rel * max(abs(expected), abs(actual))
    check(ok, "%s: %r != %r (relative tolerance %g)" % (message, actual, expected, rel))


def schema_errors(ctx, doc):
    import jsonschema  # imported here so a missing module fails a test, not the whole file

    validator = jsonschema.Draft7Validator(ctx.schema())
    return ["%s: %s" % ("/".join(str(p) for p in e.absolute_path) or "(root)", e.message)
            for e in validator.iter_errors(doc)]


def load_report(ctx, path):
    """Reads a run report and fails the test unless it is JSON that validates against the schema."""
    check(os.path.isfile(path), "no report was written at %s" % path)
    with open(path) as f:
        doc = json.load(f)
    errors = schema_errors(ctx, doc)
    check(not errors, "report %s does not validate against the schema:\n  %s" %
          (path, "\n  ".join(errors[:20])))
    return doc


def leftover_files(directory):
    """What a failed command left in directory (a report, or an atomic write's temporary file)."""
    return sorted(os.listdir(directory))


def main(test_functions, argv=None):
    """Runs each test function with the Context; prints its name and PASS/FAIL, then the totals."""
    args = parse_args(argv)
    ctx = Context(args.binary, args.repo)
    if not os.access(ctx.binary, os.X_OK):
        print("FAIL: %s is not an executable" % ctx.binary)
        print("0 passed, 1 failed")
        return 1
    passed = failed = 0
    suite_start = time.monotonic()
    for fn in test_functions:
        if args.filter and args.filter not in fn.__name__:
            continue
        start = time.monotonic()
        try:
            fn(ctx)
        except Exception:  # a test failure or an unexpected error: both fail this test only
            failed += 1
            print("%s ... FAIL (%.1f s)" % (fn.__name__, time.monotonic() - start), flush=True)
            print("  " + traceback.format_exc().replace("\n", "\n  "), flush=True)
        else:
            passed += 1
            print("%s ... PASS (%.1f s)" % (fn.__name__, time.monotonic() - start), flush=True)
    print("# total %.1f s" % (time.monotonic() - suite_start))
    print("%d passed, %d failed" % (passed, failed), flush=True)
    return 1 if failed or passed == 0 else 0


def run_main(test_functions):
    sys.exit(main(test_functions))
