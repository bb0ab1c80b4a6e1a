"""The docs against this build: README.md and every guide in docs/.

Each documented example (a ```sh block of one command followed by its output block, as
harness/scripts/docs.py finds them) is run here as written, tiny shapes and all, and every line of
the documented output must appear, in order, in what the run prints, up to its shape: numbers,
units of time and the host name aside, and for a '#' line only what precedes its first colon (the
rest, a health verdict or which phases grew, follows the machine's noise). So a renamed column, a
lost or reordered line, a new line printed where the docs show none between two of theirs, or an
example of a flag that no longer exists fails here, while a machine's timings do not.
`bash harness/scripts/docs.sh` rewrites the examples from this build.

Every other `moebench` command line of the docs' ```sh blocks is parsed by the binary
(MOEBENCH_PARSE_ONLY=1: the flags checked as `run` checks them, nothing run), so a renamed or
removed flag in any of them fails too. The figures the prose quotes from `moebench plan` and the
phase list are this build's.
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

NUMBER = re.compile(r"[-+]?(?:\d[\d,]*(?:\.\d*)?|\.\d+)(?:e[-+]?\d+)?")


def docs_module(ctx):
    sys.path.insert(0, os.path.join(ctx.repo, "harness", "scripts"))
    import docs
    return docs


def all_text(ctx):
    docs = docs_module(ctx)
    return {os.path.relpath(p, ctx.repo): open(p).read() for p in docs.markdown_files(ctx.repo)}


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


def compare(where, command, documented, printed):
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
            raise e2e.TestFailure("%s: %s\n  documented line %r (shape %r) is not in what this "
                                  "build printed, after the lines matched so far:\n%s"
                                  % (where, command, line, want, printed))


def run_documented(ctx, command, cwd):
    args = shlex.split(command)
    np = None
    if args[0] == "mpirun":
        np = int(args[args.index("-np") + 1])
        args = args[args.index("-np") + 2:]
    e2e.check(args[0] == "build/moebench", "unexpected command %r" % command)
    return e2e.run_moebench(ctx, args[1:], np=np, timeout=240, cwd=cwd)


def test_example_outputs_match_this_build(ctx):
    docs = docs_module(ctx)
    with tempfile.TemporaryDirectory() as tmp:
        docs.prepare(ctx.binary, tmp, e2e.mpi_env())  # the demo's runs, the report fixtures
        ran = 0
        for where, text in all_text(ctx).items():
            for ex in docs.examples(text):
                command, documented, _ = ex
                if command in docs.CHECKED_ELSEWHERE:
                    print("  skipped (%s): %s" % (docs.CHECKED_ELSEWHERE[command], command))
                    continue
                r = run_documented(ctx, command, tmp)
                e2e.check(not r.timed_out, "%s: %s timed out" % (where, command), r)
                printed = r.stdout + r.stderr
                if ex.excerpt:
                    printed = "\n".join(docs.excerpt_of(docs.tidy(printed), ex.excerpt))
                compare(where, command, documented, printed)
                print("  %s matches (%d lines, %.1f s): %s" % (where, len(documented), r.wall_s,
                                                                command))
                ran += 1
        e2e.check(ran >= 7, "only %d documented examples ran" % ran)


def moebench_args(line):
    """The arguments after the moebench binary on a documented command line, None where the
    line runs no moebench (a path given to a script's --moebench flag is not one)."""
    try:
        tokens = shlex.split(line)
    except ValueError:
        return None
    for i, t in enumerate(tokens):
        if (t == "moebench" or t.endswith("/moebench")) and not (
                i > 0 and tokens[i - 1].startswith("--")):
            args = []
            for a in tokens[i + 1:]:
                if a in ("|", "&&", ";", ">", "2>&1"):
                    break
                args.append(a)
            return args
    return None


def test_every_command_line_parses(ctx):
    """Every `moebench` command line in the docs' ```sh blocks, parsed by this binary: a flag
    renamed or removed fails here, in any guide."""
    docs = docs_module(ctx)
    env = dict(e2e.mpi_env(), MOEBENCH_PARSE_ONLY="1")
    checked = 0
    for where, text in all_text(ctx).items():
        for line in docs.command_lines(text):
            args = moebench_args(line)
            if args is None:
                continue
            r = subprocess.run([ctx.binary] + args, env=env, capture_output=True, text=True,
                               timeout=60)
            e2e.check(r.returncode == 0, "%s: `%s` does not parse with this build: %s" % (
                where, line, r.stderr.strip()))
            checked += 1
    e2e.check(checked >= 15, "only %d documented command lines found" % checked)
    print("  %d documented command lines parse" % checked)


def example_output(ctx, command_start):
    docs = docs_module(ctx)
    for text in all_text(ctx).values():
        for command, documented, _ in docs.examples(text):
            if command.startswith(command_start):
                return documented
    raise e2e.TestFailure("the docs have no example of %r" % command_start)


def test_pipelined_example_adds_up(ctx):
    """The pipelined example's shares (with `other`) add up to 100%, to the rounding of 14 shares
    printed to 0.1% (at most 0.7%), and the 4-rank example's likewise."""
    for start in ("mpirun -np 8 build/moebench run --preset deepseek-v3-tiny --pp 2 --vp 2",
                  "mpirun -np 4 build/moebench run --preset deepseek-v3-tiny --ep 4"):
        shares = [float(m.group(1)) for line in example_output(ctx, start)
                  for m in [re.match(r"^   [a-z_]+ +-?[0-9.]+ +(-?[0-9.]+)%", line)] if m]
        e2e.check(len(shares) == 14, "%s: %d phase rows (13 and other)" % (start, len(shares)))
        e2e.check(abs(sum(shares) - 100) <= 1, "%s: shares add up to %.1f%%" % (start, sum(shares)))


def test_phase_list_is_this_builds(ctx):
    text = "\n".join(all_text(ctx).values())
    r = e2e.run_moebench(ctx, ["phases", "--json"], timeout=30)
    names = [p["name"] for p in json.loads(r.stdout)["phases"]]
    m = re.search(r"\*\*Phases\*\* \(as `moebench phases` lists them: ([a-z_, \n]+)\)", text)
    e2e.check(m is not None, "the docs have no phase list")
    listed = [n.strip() for n in m.group(1).replace("\n", " ").split(",")]
    e2e.check(listed == names, "the docs list %r, moebench phases %r" % (listed, names))


def test_plan_figures_quoted(ctx):
    """The GB300 paragraph's figures are `moebench plan`'s, as this build computes them."""
    text = " ".join(" ".join(all_text(ctx).values()).split())
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
        e2e.check(q in text, "the docs do not say %r (this build's plan)" % q)


def test_readme_is_short_and_links_the_guides(ctx):
    """The README is what the tool is, how to set it up, one example a job and where to read on:
    at most 300 lines, every guide linked, every link to a file that exists."""
    texts = all_text(ctx)
    readme = texts["README.md"]
    e2e.check(readme.count("\n") <= 300, "README.md has %d lines" % readme.count("\n"))
    for where, text in texts.items():
        base = os.path.dirname(os.path.join(ctx.repo, where))
        for target in re.findall(r"\]\(([^)#]+?)(?:#[^)]*)?\)", text):
            if target.startswith("http"):
                continue
            e2e.check(os.path.exists(os.path.normpath(os.path.join(base, target))),
                      "%s links %s, which does not exist" % (where, target))
    for guide in sorted(os.listdir(os.path.join(ctx.repo, "docs"))):
        if guide.endswith(".md") and guide != "README.md":
            e2e.check("docs/" + guide in readme, "README.md does not link docs/%s" % guide)


TESTS = [test_every_command_line_parses, test_readme_is_short_and_links_the_guides,
         test_example_outputs_match_this_build, test_pipelined_example_adds_up,
         test_phase_list_is_this_builds, test_plan_figures_quoted]

if __name__ == "__main__":
    e2e.run_main(TESTS)
