"""The README's examples against this build: its example outputs, the phase list and the figures
its prose quotes from `moebench plan`.

Each documented command (a ```sh block of one command followed by its output block) is run here as
written, tiny shapes and all, and every line of the documented output must appear, in order, in
what the run prints, up to its shape: numbers, units of time and the host name aside, and for a
'#' line only what precedes its first colon (the rest, a health verdict or which phases grew,
follows the machine's noise). So a renamed column, a lost or reordered line, a new line printed
where the README shows none between two of its lines, or an example of a flag that no longer
exists fails here, while a machine's timings do not.
"""

import json
import os
import re
import shlex
import socket
import subprocess
import sys
import tempfile

import moebench_e2e as e2e

README = "README.md"
# Commands whose output block is checked elsewhere (and why), so not run twice.
CHECKED_ELSEWHERE = {
    "mpirun -np 8 build/moebench run --recipe gb300-mxfp8-256 --preset deepseek-v3-tiny --ep 4":
        "test_pipeline.test_recipe_on_small_model_defaults runs it and checks these lines",
}
NUMBER = re.compile(r"[-+]?(?:\d[\d,]*(?:\.\d*)?|\.\d+)(?:e[-+]?\d+)?")


def examples(text):
    """(command, documented output lines) for each one-command ```sh block followed by an output
    block."""
    blocks = re.findall(r"```(\w*)\n(.*?)```", text, re.S)
    out = []
    for (lang, body), (next_lang, next_body) in zip(blocks, blocks[1:]):
        if lang != "sh" or next_lang != "":
            continue
        command = " ".join(line.rstrip("\\").strip() for line in body.strip().splitlines())
        if "moebench" not in command or "#" in body:
            continue
        out.append((command, next_body.rstrip("\n").splitlines()))
    return out


def shape(line, host=None):
    if host:
        line = re.sub(r"(on\s+)%s(\s+local)" % re.escape(host), r"\1vm\2", line)
        line = line.replace("(host %s" % host, "(host vm").replace("(%s)" % host, "(vm)")
    s = " ".join(NUMBER.sub("N", line).split())
    s = re.sub(r"\bN (ms|s|min)\b", "N T", s)
    # A scaling row's verdicts follow the machine (a noisy CI host may show a suspect).
    s = re.sub(r"(PASS|FAIL(: [\w, ]+)?)$", "VERDICT", s) if re.match(r"N N N ", s) else s
    if s.startswith("#") and ":" in s:
        s = s[:s.index(":") + 1]
    return s


def compare(command, documented, printed):
    """Every documented line, in order, among the printed ones (by shape)."""
    host = socket.gethostname()
    actual = [shape(line, host) for line in printed.splitlines()]
    at = 0
    for line in documented:
        if "..." in line:  # an elision: "# ... (one line per step)"
            continue
        want = shape(line)
        try:
            at = actual.index(want, at) + 1
        except ValueError:
            raise e2e.TestFailure("README: %s\n  documented line %r (shape %r) is not in what this "
                                  "build printed, after the lines matched so far:\n%s"
                                  % (command, line, want, printed))


def run_documented(ctx, command, cwd):
    args = shlex.split(command)
    np = None
    if args[0] == "mpirun":
        np = int(args[args.index("-np") + 1])
        args = args[args.index("-np") + 2:]
    e2e.check(args[0] == "build/moebench", "unexpected command %r" % command)
    return e2e.run_moebench(ctx, args[1:], np=np, timeout=240, cwd=cwd)


def test_example_outputs_match_this_build(ctx):
    with open(os.path.join(ctx.repo, README)) as f:
        text = f.read()
    found = examples(text)
    e2e.check(len(found) >= 5, "README examples found: %r" % [c for c, _ in found])
    with tempfile.TemporaryDirectory() as tmp:
        # What the examples read: the demo's three runs, and the synthetic fixtures.
        os.makedirs(os.path.join(tmp, "demo"))
        for np in (1, 2, 4):
            r = e2e.run_moebench(ctx, ["run", "--preset", "deepseek-v3-tiny", "--ep", np,
                                       "--verify", "--quiet", "--out",
                                       os.path.join(tmp, "demo", "run-np%d.json" % np)],
                                 np=np, timeout=120)
            e2e.check(r.rc in (0, 5), "demo run at %d ranks" % np, r)  # 5: a noisy suspect
        fixtures = subprocess.run(
            [sys.executable, os.path.join(ctx.repo, "tests", "e2e", "report_fixtures.py"),
             "--binary", ctx.binary, "--out", os.path.join(tmp, "fixtures"),
             "--real", os.path.join(tmp, "demo", "run-np2.json")],
            capture_output=True, text=True, timeout=120)
        e2e.check(fixtures.returncode == 0, "report_fixtures.py: %s" % fixtures.stderr)
        ran = 0
        for command, documented in found:
            if command in CHECKED_ELSEWHERE:
                print("  skipped (%s): %s" % (CHECKED_ELSEWHERE[command], command))
                continue
            r = run_documented(ctx, command, tmp)
            e2e.check(not r.timed_out, "README: %s timed out" % command, r)
            compare(command, documented, r.stdout + r.stderr)
            print("  matches (%d lines, %.1f s): %s" % (len(documented), r.wall_s, command))
            ran += 1
        e2e.check(ran >= 5, "only %d README examples ran" % ran)


def example_output(text, command_start):
    for command, documented in examples(text):
        if command.startswith(command_start):
            return documented
    raise e2e.TestFailure("README has no example of %r" % command_start)


def test_pipelined_example_adds_up(ctx):
    """The pipelined example's shares (with `other`) add up to 100%, to the rounding of 14 shares
    printed to 0.1% (at most 0.7%), and the 4-rank example's likewise."""
    with open(os.path.join(ctx.repo, README)) as f:
        text = f.read()
    for start in ("mpirun -np 8 build/moebench run --preset deepseek-v3-tiny --pp 2 --vp 2",
                  "mpirun -np 4 build/moebench run --preset deepseek-v3-tiny --ep 4"):
        shares = [float(m.group(1)) for line in example_output(text, start)
                  for m in [re.match(r"^   [a-z_]+ +-?[0-9.]+ +(-?[0-9.]+)%", line)] if m]
        e2e.check(len(shares) == 14, "%s: %d phase rows (13 and other)" % (start, len(shares)))
        e2e.check(abs(sum(shares) - 100) <= 1, "%s: shares add up to %.1f%%" % (start, sum(shares)))


def test_phase_list_is_this_builds(ctx):
    with open(os.path.join(ctx.repo, README)) as f:
        text = f.read()
    r = e2e.run_moebench(ctx, ["phases", "--json"], timeout=30)
    names = [p["name"] for p in json.loads(r.stdout)["phases"]]
    m = re.search(r"\*\*Phases\*\* \(as `moebench phases` lists them: ([a-z_, \n]+)\)", text)
    e2e.check(m is not None, "README has no phase list")
    listed = [n.strip() for n in m.group(1).replace("\n", " ").split(",")]
    e2e.check(listed == names, "README lists %r, moebench phases %r" % (listed, names))


def test_plan_figures_quoted(ctx):
    """The GB300 paragraph's figures are `moebench plan`'s, as this build computes them."""
    with open(os.path.join(ctx.repo, README)) as f:
        text = " ".join(f.read().split())
    gib = 2.0 ** 30

    def plan(name):
        r = e2e.run_moebench(ctx, ["plan", "--recipe", name, "--json"], timeout=60)
        e2e.check(r.rc == 0, "plan --recipe %s" % name, r)
        return json.loads(r.stdout)["memory"]

    own = plan("gb300-mxfp8-256")
    quoted = [
        "%.1f GiB for its largest rank" % (own["max_rank_bytes"] / gib),
        "of the GPU's %.1f GiB, %.1f GiB to spare" % (own["gpu_memory_bytes"] / gib,
                                                      own["margin_bytes"] / gib),
        "Megatron runs it needs %.1f GiB" % (own["megatron"]["max_rank_bytes"] / gib),
        "fits as published, with %.1f GiB" % (plan("mlm-gb300-mxfp8-256")["margin_bytes"] / gib),
    ]
    for q in quoted:
        e2e.check(q in text, "README does not say %r (this build's plan)" % q)


TESTS = [test_example_outputs_match_this_build, test_pipelined_example_adds_up,
         test_phase_list_is_this_builds, test_plan_figures_quoted]

if __name__ == "__main__":
    e2e.run_main(TESTS)
