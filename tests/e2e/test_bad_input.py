"""User mistakes end with exit code 2, one clear line on stderr (from rank 0 only), no hang, and
no report (nor a temporary file of one) left behind: `run`'s and `plan`'s flags, model configs,
report files, and the diagnostics' input (--inject fault specs, the health flags, `linkcheck`'s
flags). The diagnostics' own tests (test_faults, test_health, test_linkcheck) judge elapsed time
and run alone; these do not, so they live here."""

import json
import os
import re
import signal
import socket
import subprocess
import tempfile
import time

import moebench_e2e as e2e

TIMEOUT = 60
TINY = ["--preset", "deepseek-v3-tiny", "--warmup", "0", "--steps", "1"]


def expect_usage_error(ctx, run_args, keywords, np=None, out_dir=None):
    """Runs moebench, expects exit 2 and one stderr line naming the problem; returns that line."""
    with tempfile.TemporaryDirectory() as tmp:
        out_dir = out_dir or tmp
        args = list(run_args)
        if args and args[0] in ("run", "linkcheck") and "--out" not in args:
            args += ["--out", os.path.join(out_dir, "r.json")]
        r = e2e.run_moebench(ctx, args, np=np, timeout=TIMEOUT)
        e2e.check(not r.timed_out, "moebench hung on a usage error", r)
        e2e.check(r.rc == e2e.EXIT_USAGE, "expected exit %d, got %s" % (e2e.EXIT_USAGE, r.rc), r)
        lines = r.moebench_lines()
        e2e.check(len(lines) == 1, "expected exactly one 'moebench:' line on stderr, got %d" %
                  len(lines), r)
        if np is None:
            # Without mpirun nothing else may be printed: the line is the whole of stderr.
            others = [l for l in r.messages if l.strip() and l not in lines]
            e2e.check(not others, "stderr has more than the one error line", r)
        for k in keywords:
            e2e.check(k in lines[0], "the error line does not mention %r: %s" % (k, lines[0]), r)
        left = e2e.leftover_files(out_dir)
        e2e.check(not left, "files left in the output directory after a usage error: %r" % left, r)
        return lines[0]


def make_case(name, run_args, keywords, np=None):
    def test(ctx):
        expect_usage_error(ctx, run_args, keywords, np=np)

    test.__name__ = "test_" + name + ("_np%d" % np if np else "")
    return test


CASES = [
    ("unknown_flag", ["run"] + TINY + ["--bogus-flag"], ["--bogus-flag"]),
    ("layers_0", ["run"] + TINY + ["--layers", "0"], ["--layers 0", "1..4"]),
    ("layers_99", ["run"] + TINY + ["--layers", "99"], ["--layers 99", "1..4"]),
    ("routing_zipf_0", ["run"] + TINY + ["--routing", "zipf:0"], ["zipf", "> 0"]),
    ("routing_bogus", ["run"] + TINY + ["--routing", "bogus"], ["bogus", "balanced"]),
    ("attention_maybe", ["run"] + TINY + ["--attention", "maybe"], ["--attention", "maybe"]),
    ("grad_reduce_foo", ["run"] + TINY + ["--grad-reduce", "foo"], ["--grad-reduce", "foo"]),
    ("overlap_maybe", ["run"] + TINY + ["--overlap", "maybe"], ["--overlap", "maybe"]),
    ("grouped_gemm_bogus", ["run"] + TINY + ["--grouped-gemm", "bogus"],
     ["--grouped-gemm bogus", "loop", "grouped"]),
    ("grouped_gemm_on_cpu", ["run"] + TINY + ["--grouped-gemm", "grouped"],
     ["--grouped-gemm grouped is not available with --backend cpu", "valid: loop"]),
    ("attention_impl_bogus", ["run"] + TINY + ["--attention-impl", "flash"],
     ["--attention-impl flash", "auto", "cudnn", "gemm"]),
    ("attention_impl_cudnn_on_cpu", ["run"] + TINY + ["--attention-impl", "cudnn"],
     ["--attention-impl cudnn is not available with --backend cpu", "valid: auto or gemm"]),
    ("grad_bucket_mb_negative", ["run"] + TINY + ["--grad-bucket-mb", "-1"],
     ["--grad-bucket-mb -1", "MiB"]),
    ("grad_bucket_mb_word", ["run"] + TINY + ["--grad-bucket-mb", "big"],
     ["--grad-bucket-mb", "big"]),
    ("neither_preset_nor_config", ["run", "--warmup", "0"], ["--preset", "--model-config"]),
    # Upper bounds: every count made from the flags stays inside int64 (2^63-1 micro-batches
    # printed a negative PFLOP/step before).
    ("micro_batch_2p63", ["run"] + TINY + ["--micro-batch", "9223372036854775807"],
     ["--micro-batch must be in 1..65536"]),
    ("seq_len_2p62", ["run"] + TINY + ["--seq-len", "4611686018427387904"],
     ["--seq-len must be in 1..1048576"]),
    ("global_batch_huge", ["run"] + TINY + ["--global-batch", "9223372036854775807"],
     ["--global-batch must be in 0..16777216"]),
    ("steps_2p31", ["run", "--preset", "deepseek-v3-tiny", "--steps", "2147483647"],
     ["--steps must be in 1..10000000"]),
    ("warmup_negative", ["run", "--preset", "deepseek-v3-tiny", "--warmup", "-1"],
     ["--warmup must be in 0..10000000"]),
    ("blas_threads_huge", ["run"] + TINY + ["--blas-threads", "100000"],
     ["--blas-threads must be in 1..1024"]),
    ("timeout_1e308", ["run"] + TINY + ["--timeout", "1e308"], ["--timeout", "(0, 1e6]"]),
    ("timeout_nan", ["run"] + TINY + ["--timeout", "nan"], ["--timeout"]),
    ("plan_world_2p31", ["plan", "--preset", "deepseek-v3-tiny", "--world", "2147483647"],
     ["must be in 1..1048576"]),
    ("plan_gpu_memory_negative", ["plan", "--preset", "deepseek-v3-tiny", "--gpu-memory", "-1"],
     ["--gpu-memory -1"]),
    ("plan_ep_32_experts", ["plan", "--preset", "deepseek-v3-tiny", "--world", "32", "--ep", "32"],
     ["--ep 32", "16 routed experts"]),
]

MPI_CASES = [  # (name, args, keywords, np)
    ("ep_3", ["run"] + TINY + ["--ep", "3"], ["--ep 3", "4 ranks"], 4),
    ("ep_32_experts", ["run"] + TINY + ["--ep", "32"], ["--ep 32", "16 routed experts"], 32),
    ("unknown_flag", ["run"] + TINY + ["--bogus-flag"], ["--bogus-flag"], 4),
    ("routing_bogus", ["run"] + TINY + ["--routing", "bogus"], ["bogus"], 4),
    ("attention_maybe", ["run"] + TINY + ["--attention", "maybe"], ["--attention"], 4),
    ("layers_99", ["run"] + TINY + ["--layers", "99"], ["--layers 99"], 4),
    # Refused by the backend after MPI is up: every rank agrees before anything is written.
    ("attention_impl_cudnn_on_cpu", ["run"] + TINY + ["--attention-impl", "cudnn"],
     ["--attention-impl cudnn", "valid: auto or gemm"], 2),
]

# The diagnostics' input: fault specs (--inject), the health flags, and linkcheck's flags.
INJECT = ["run"] + TINY + ["--inject"]
LINKCHECK = ["linkcheck", "--quiet"]
DIAGNOSTICS_CASES = [  # (name, args, keywords, np)
    ("inject_delay_without_seconds", INJECT + ["delay:rank=0"], ["seconds=T is required"], 2),
    ("inject_delay_negative", INJECT + ["delay:rank=0,seconds=-1"],
     ["seconds must be a number in (0, 1e6]"], 2),
    ("inject_delay_1e308", INJECT + ["delay:rank=0,seconds=1e308"],
     ["seconds must be a number in (0, 1e6]"], 2),
    ("inject_hang_with_seconds", INJECT + ["hang:rank=0,seconds=1"], ["unknown field"], 2),
    ("inject_unknown_fault", INJECT + ["explode:rank=0"], ["unknown fault"], 2),
    ("inject_die_without_rank", INJECT + ["die:step=1"], ["rank=R is required"], 2),
    ("inject_corrupt_a_step", INJECT + ["corrupt:rank=0,phase=step"], ["cannot be corrupted"], 2),
    ("inject_corrupt_without_verify", INJECT + ["corrupt:rank=1"],
     ["only --verify's comparison catches a corrupted value", "add --verify"], 2),
    ("inject_hang_rank_9", INJECT + ["hang:rank=9"], ["no rank 9"], 2),
    ("inject_slow_rank_4", INJECT + ["slow:rank=4,factor=2"], ["no rank 4 in a world of 2"], 2),
    ("inject_slowlink_in_run", INJECT + ["slowlink:a=0,b=1,factor=2"], ["moebench linkcheck"], 2),
    ("inject_slow_factor_1", INJECT + ["slow:rank=0,factor=1"],
     ["factor must be a number in (1, 1000]"], 2),
    ("health_mad_negative", ["run"] + TINY + ["--health-mad", "-1"], ["--health-mad -1: must be"],
     2),
    ("health_min_slowdown_nan", ["run"] + TINY + ["--health-min-slowdown", "nan"],
     ["--health-min-slowdown nan: must be"], 2),
    ("linkcheck_level_pairs", LINKCHECK + ["--level", "pairs"], ["--level pairs: valid: rank"], 2),
    ("linkcheck_one_rank", LINKCHECK, ["linkcheck needs 2 or more ranks"], 1),
    ("linkcheck_inject_slow", LINKCHECK + ["--inject", "slow:rank=0,factor=2"],
     ["linkcheck injects slowlink"], 2),
    ("linkcheck_slowlink_rank_2", LINKCHECK + ["--inject", "slowlink:a=0,b=2,factor=2"],
     ["no rank 2 in a world of 2"], 2),
    ("linkcheck_domain_3_of_4", LINKCHECK + ["--nvlink-domain-size", "3"],
     ["--nvlink-domain-size 3 does not divide"], 4),
    ("linkcheck_iterations_0", LINKCHECK + ["--iterations", "0"], ["--iterations 0: must be"], 2),
    ("linkcheck_small_bytes_2", LINKCHECK + ["--small-bytes", "2"], ["--small-bytes 2: must be"],
     2),
    ("linkcheck_out_in_missing_directory", LINKCHECK + ["--out", "/nonexistent-dir/l.json"],
     ["/nonexistent-dir"], 2),
]


def test_both_preset_and_config(ctx):
    expect_usage_error(ctx, ["run", "--preset", "deepseek-v3-tiny", "--model-config",
                             ctx.dsv3_config], ["--preset", "--model-config"])


def write_config(ctx, directory, name, edit):
    """DeepSeek-V3's published config.json with one edit."""
    with open(ctx.dsv3_config) as f:
        cfg = json.load(f)
    edit(cfg)
    path = os.path.join(directory, name)
    with open(path, "w") as f:
        json.dump(cfg, f)
    return path


def bad_config_test(name, make_file, keywords_of):
    def test(ctx):
        e2e.check(os.path.isfile(ctx.dsv3_config), "missing test data %s" % ctx.dsv3_config)
        with tempfile.TemporaryDirectory() as cfg_dir:
            path = make_file(ctx, cfg_dir)
            expect_usage_error(ctx, ["run", "--model-config", path, "--warmup", "0"],
                               keywords_of(path), np=1)

    test.__name__ = "test_model_config_" + name
    return test


def _non_json(ctx, d):
    path = os.path.join(d, "not-json.json")
    with open(path, "w") as f:
        f.write("this is { not JSON\n")
    return path


def _without_n_group(ctx, d):
    return write_config(ctx, d, "no-n-group.json", lambda c: c.pop("n_group"))


def _indivisible_groups(ctx, d):
    return write_config(ctx, d, "seven-groups.json", lambda c: c.update(n_group=7))


CONFIG_TESTS = [
    bad_config_test("missing_file", lambda ctx, d: os.path.join(d, "does-not-exist.json"),
                    lambda p: [p]),
    bad_config_test("not_json", _non_json, lambda p: [p, "JSON"]),
    bad_config_test("missing_n_group", _without_n_group, lambda p: [p, "n_group"]),
    bad_config_test("experts_not_divisible_by_groups", _indivisible_groups,
                    lambda p: [p, "n_group", "n_routed_experts"]),
]


def test_out_in_missing_directory(ctx):
    e2e.check(not os.path.exists("/nonexistent-dir"), "/nonexistent-dir exists on this machine")
    expect_usage_error(ctx, ["run"] + TINY + ["--out", "/nonexistent-dir/r.json"],
                       ["/nonexistent-dir"], np=1)
    e2e.check(not os.path.exists("/nonexistent-dir"), "moebench created /nonexistent-dir")


def test_out_not_a_regular_file(ctx):
    """--out replaces only regular files: a symlink, a device or a FIFO is refused before any
    work, and left as it was."""
    with tempfile.TemporaryDirectory() as tmp:
        target = os.path.join(tmp, "target.json")
        with open(target, "w") as f:
            f.write("keep me")
        link = os.path.join(tmp, "link.json")
        os.symlink(target, link)
        fifo = os.path.join(tmp, "fifo")
        os.mkfifo(fifo)
        for out, words in ((link, ["symbolic link"]), (fifo, ["not a regular file"]),
                           ("/dev/null", ["not a regular file"])):
            expect_usage_error(ctx, ["run"] + TINY + ["--out", out], [out] + words, np=1,
                               out_dir=tempfile.mkdtemp(dir=tmp))
        e2e.check(os.path.islink(link) and open(target).read() == "keep me",
                  "the symlink or its target changed")
        # The step log is checked the same way.
        expect_usage_error(ctx, ["run"] + TINY + ["--step-log", link], ["symbolic link"], np=1,
                           out_dir=tempfile.mkdtemp(dir=tmp))


def _start_run(ctx, out, steps=40):
    """A 2-rank run in the background, long enough to plant things while it runs."""
    cmd = ["mpirun", "-np", "2", "--oversubscribe", ctx.binary, "run", "--preset",
           "deepseek-v3-tiny", "--warmup", "0", "--steps", str(steps), "--quiet", "--out", out]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=e2e.mpi_env(), start_new_session=True, text=True)


def _wait_running(proc, out):
    """Until the run has logged a step (its destinations were checked long before)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if os.path.exists(out + ".steps.jsonl") and os.path.getsize(out + ".steps.jsonl") > 0:
            return
        time.sleep(0.05)
    e2e.check(False, "the run did not get going (exit %r)" % proc.poll())


def _finish(proc, timeout=120):
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        e2e.check(False, "the run hung: %s" % err[-2000:])
    return proc.returncode, out, err


def _moebench_pids(out):
    """The ranks of the run writing `out` (their command lines name it)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % entry, "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if out.encode() in argv and not argv[0].endswith(b"mpirun"):
            pids.append(int(entry))
    return pids


def test_links_and_fifos_planted_during_a_run(ctx):
    """Planted after the run checked its destinations: a symlink at the report's name and at
    every temporary name an earlier moebench used (OUT.tmp.HOST.PID), and a FIFO at the report's
    name. Nothing is written through a link, nothing blocks, and the report is a regular file."""
    host = socket.gethostname()
    with tempfile.TemporaryDirectory() as tmp:
        victim = os.path.join(tmp, "victim.json")
        with open(victim, "w") as f:
            f.write("another user's file")
        out = os.path.join(tmp, "r.json")
        proc = _start_run(ctx, out)
        _wait_running(proc, out)
        pids = _moebench_pids(out)
        e2e.check(len(pids) >= 2, "the run's ranks were not found: %r" % pids)
        for pid in pids:
            os.symlink(victim, "%s.tmp.%s.%d" % (out, host, pid))
        os.symlink(victim, out)
        rc, _, err = _finish(proc)
        e2e.check(rc == 0, "exit %r with links planted: %s" % (rc, err[-2000:]))
        with open(victim) as f:
            e2e.check(f.read() == "another user's file", "the report was written through a link")
        e2e.check(os.path.isfile(out) and not os.path.islink(out),
                  "the report is not a regular file in place of the link")
        e2e.load_report(ctx, out)
        for pid in pids:  # the planted links were not ours to remove, and were never opened
            e2e.check(os.path.islink("%s.tmp.%s.%d" % (out, host, pid)), "a planted link moved")

        out2 = os.path.join(tmp, "r2.json")
        proc = _start_run(ctx, out2)
        _wait_running(proc, out2)
        os.mkfifo(out2)
        rc, _, err = _finish(proc)
        e2e.check(rc == 0 and os.path.isfile(out2), "a FIFO planted at --out: exit %r, %s" %
                  (rc, err[-2000:]))
        e2e.load_report(ctx, out2)
        left = [f for f in e2e.leftover_files(tmp) if ".tmp." in f and host not in f]
        e2e.check(not left, "temporary files left: %r" % left)


def test_report_inputs_planted(ctx):
    """`report` and `validate` never block on a FIFO among their inputs (their outputs' temporary
    names are random and exclusive: tests/unit/atomic_file_test.cpp)."""
    with tempfile.TemporaryDirectory() as tmp:
        good = _write_valid_report(ctx, tmp)
        fifo = os.path.join(tmp, "fifo.json")
        os.mkfifo(fifo)
        for args in (["report", fifo, good, "--out", os.path.join(tmp, "s.json")],
                     ["validate", fifo]):
            r = e2e.run_moebench(ctx, args, timeout=30)
            e2e.check(not r.timed_out and r.rc == e2e.EXIT_USAGE, "%s of a FIFO" % args[0], r)
            e2e.check(fifo in r.stderr and "FIFO" in r.stderr, "the message names the FIFO", r)
        e2e.check(not os.path.exists(os.path.join(tmp, "s.json")), "a partial report was written")


def test_memory_estimate_exceeds_machine(ctx):
    line = expect_usage_error(ctx, ["run", "--preset", "deepseek-v3", "--layers", "61",
                                    "--warmup", "0", "--steps", "1"], ["needs", "available"], np=1)
    m = re.search(r"needs[^0-9]*([0-9.]+) GiB.*?([0-9.]+) GiB is available", line)
    e2e.check(m is not None, "the message does not give both sizes in GiB: %s" % line)
    need, available = float(m.group(1)), float(m.group(2))
    e2e.check(need > available > 0, "needs %g GiB, available %g GiB: not an overflow" %
              (need, available))


def _write_valid_report(ctx, directory):
    path = os.path.join(directory, "good.json")
    r = e2e.run_moebench(ctx, ["run"] + TINY + ["--out", path, "--quiet"], np=1, timeout=TIMEOUT)
    e2e.check(r.rc == 0, "could not produce a report to validate", r)
    return path


def expect_validate(ctx, path, rc):
    r = e2e.run_moebench(ctx, ["validate", path], timeout=TIMEOUT)
    e2e.check(r.rc == rc, "validate %s: expected exit %d, got %s" % (path, rc, r.rc), r)
    if rc != 0:
        e2e.check(path in r.stderr, "validate's message does not name the file", r)
    return r


def test_validate_reports(ctx):
    with tempfile.TemporaryDirectory() as tmp:
        good = _write_valid_report(ctx, tmp)
        r = expect_validate(ctx, good, 0)
        e2e.check(good in r.stdout and "valid" in r.stdout, "validate does not confirm the file", r)
        with open(good) as f:
            text = f.read()

        truncated = os.path.join(tmp, "truncated.json")
        with open(truncated, "w") as f:
            f.write(text[: len(text) // 2])
        expect_validate(ctx, truncated, e2e.EXIT_USAGE)

        not_json = os.path.join(tmp, "not-json.json")
        with open(not_json, "w") as f:
            f.write("moebench report? no\n")
        expect_validate(ctx, not_json, e2e.EXIT_USAGE)

        doc = json.loads(text)
        del doc["results"]["per_rank"]
        missing = os.path.join(tmp, "missing-key.json")
        with open(missing, "w") as f:
            json.dump(doc, f)
        r = expect_validate(ctx, missing, e2e.EXIT_USAGE)
        e2e.check("per_rank" in r.stderr, "validate does not name the missing key", r)

        # A number beyond double's range (found by tests/fuzz/fuzz_report in `report`): exit 2.
        huge = os.path.join(tmp, "huge-number.json")
        with open(huge, "w") as f:
            f.write(text.replace('"schema_version": 1', '"schema_version": 1e400', 1))
        r = expect_validate(ctx, huge, e2e.EXIT_USAGE)
        e2e.check("number overflow" in r.stderr, "validate should say why", r)
        r = e2e.run_moebench(ctx, ["report", huge, good, "--out", os.path.join(tmp, "s.json")],
                             timeout=TIMEOUT)
        e2e.check(r.rc == e2e.EXIT_USAGE and "number overflow" in r.stderr and
                  r.stderr.count("moebench:") == 1, "report of a 1e400 report", r)
        # A directory is not a report.
        r = expect_validate(ctx, tmp, e2e.EXIT_USAGE)
        e2e.check("not a regular file" in r.stderr, "validate of a directory", r)


TESTS = ([make_case(n, a, k) for n, a, k in CASES] + [test_both_preset_and_config] +
         CONFIG_TESTS + [test_out_in_missing_directory, test_out_not_a_regular_file,
                         test_memory_estimate_exceeds_machine] +
         [make_case(n, a, k, np) for n, a, k, np in MPI_CASES + DIAGNOSTICS_CASES] +
         [test_validate_reports, test_links_and_fifos_planted_during_a_run,
          test_report_inputs_planted])

if __name__ == "__main__":
    e2e.run_main(TESTS)
