#!/usr/bin/env python3
"""The console examples of README.md and docs/*.md, produced by this build.

An example is a ```sh block of one `build/moebench` command (under `mpirun -np N` where ranks
matter) followed by an output block. This runs each one on the cpu backend, in a scratch folder
holding what the examples read (the demo's three run reports, the synthetic fixtures of
tests/e2e/report_fixtures.py), and with --write rewrites the output block with what it printed:
the host name as `vm`, the per-step lines between the first and the last elided, and the rank
lines past the fourth. tests/e2e/test_readme.py checks every example the same way without
writing, so a renamed flag or a changed line fails CI.

    python3 harness/scripts/docs.py --binary build/moebench [--write] [--only FILE]
"""

import argparse
import os
import re
import shlex
import socket
import subprocess
import sys
import tempfile

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BLOCK = re.compile(r"```(\w*)\n(.*?)```", re.S)
# Between a command and its output block, `<!-- excerpt: N lines from "PREFIX" -->` makes the block
# an excerpt: the N printed lines from the first that starts with PREFIX.
EXCERPT = re.compile(r'^<!-- excerpt: (\d+) lines? from "([^"]+)" -->$')
# Examples whose output another test runs and checks itself (and why), not run twice.
CHECKED_ELSEWHERE = {
    "mpirun -np 8 build/moebench run --recipe gb300-mxfp8-256 --preset deepseek-v3-tiny --ep 4":
        "test_pipeline.test_recipe_on_small_model_defaults runs it and checks these lines",
}


def markdown_files(repo=REPO):
    """README.md and every guide in docs/, in a fixed order."""
    docs = os.path.join(repo, "docs")
    return [os.path.join(repo, "README.md")] + sorted(
        os.path.join(docs, n) for n in os.listdir(docs) if n.endswith(".md"))


def command_of(body):
    """The one command of a ```sh block, continuation lines joined; None for anything else."""
    lines = [l for l in body.strip().splitlines()]
    if not lines or any(l.lstrip().startswith("#") for l in lines):
        return None
    command = " ".join(l.rstrip("\\").strip() for l in lines)
    if "build/moebench" not in command or "\\" in command.replace("\\|", ""):
        return None
    if sum(1 for l in lines if not l.rstrip().endswith("\\")) != 1:
        return None  # several commands
    return command


class Example:
    def __init__(self, command, documented, span, excerpt):
        self.command, self.documented, self.span, self.excerpt = command, documented, span, excerpt

    def __iter__(self):  # (command, documented, span), as the callers unpack it
        return iter((self.command, self.documented, self.span))


def examples(text):
    """An Example (command, documented output, span of the output block's body, excerpt: None or
    (lines, prefix)) for each example."""
    found = []
    matches = list(BLOCK.finditer(text))
    for m, nxt in zip(matches, matches[1:]):
        if m.group(1) != "sh" or nxt.group(1) != "":
            continue
        between = text[m.end():nxt.start()].strip()
        excerpt = EXCERPT.match(between)
        if between and not excerpt:
            continue  # prose between them: the block is not this command's output
        command = command_of(m.group(2))
        if command is None:
            continue
        found.append(Example(command, nxt.group(2).rstrip("\n").splitlines(), nxt.span(2),
                             (int(excerpt.group(1)), excerpt.group(2)) if excerpt else None))
    return found


def excerpt_of(lines, excerpt):
    """The excerpt's lines of a tidied output ([] when the prefix never comes)."""
    if excerpt is None:
        return lines
    count, prefix = excerpt
    for i, line in enumerate(lines):
        if line.startswith(prefix):
            return lines[i:i + count]
    return []


# An inline command with a placeholder (NAME, FILE.json, N, ...) is a pattern, not a command line.
PLACEHOLDER = re.compile(r"\b[A-Z][A-Z_]{2,}\b|\.\.\.|<|\bN\b|\\\||\[")


def command_lines(text):
    """Every `moebench` command line of the text, for the test that each still parses: those of
    its ```sh blocks (continuation lines joined), and its inline ones that give flags and no
    placeholder (`moebench plan --recipe gb300-mxfp8-256`)."""
    out = []
    prose = BLOCK.sub("", text)
    for m in re.finditer(r"`((?:build/)?moebench [^`]+)`", prose):
        line = " ".join(m.group(1).split())
        if " -" in line and not PLACEHOLDER.search(line):
            out.append(line)
    for m in BLOCK.finditer(text):
        if m.group(1) != "sh":
            continue
        joined = m.group(2).replace("\\\n", " ")
        for line in joined.splitlines():
            line = line.split(" #")[0].strip()
            if line.startswith("#") or "moebench " not in line:
                continue
            out.append(" ".join(line.split()))
    return out


def prepare(binary, tmp, env):
    """What the examples read: the demo's run reports and the report fixtures."""
    os.makedirs(os.path.join(tmp, "demo"), exist_ok=True)
    for np in (1, 2, 4):
        subprocess.run(["mpirun", "-np", str(np), "--oversubscribe", binary, "run", "--preset",
                        "deepseek-v3-tiny", "--ep", str(np), "--verify", "--quiet", "--out",
                        os.path.join(tmp, "demo", "run-np%d.json" % np)],
                       env=env, check=False, capture_output=True, timeout=300)
    subprocess.run([sys.executable, os.path.join(REPO, "tests", "e2e", "report_fixtures.py"),
                    "--binary", binary, "--out", os.path.join(tmp, "fixtures"), "--real",
                    os.path.join(tmp, "demo", "run-np2.json")],
                   env=env, check=True, capture_output=True, timeout=300)


def argv_of(command, binary):
    args = shlex.split(command)
    prefix = []
    if args[0] == "mpirun":
        n = args.index("-np")
        prefix = ["mpirun", "-np", args[n + 1], "--oversubscribe"]
        args = args[n + 2:]
    if args[0] != "build/moebench":
        raise ValueError("an example runs build/moebench: %r" % command)
    return prefix + [binary] + args[1:]


def tidy(printed):
    """What a documented block shows of a run's output: the host as `vm`, the step lines between
    the first and the last elided, the rank lines past the fourth."""
    host = socket.gethostname()
    lines = []
    for line in printed.rstrip("\n").splitlines():
        line = re.sub(r"(on\s+)%s(\s+local)" % re.escape(host), r"\1vm\2", line)
        lines.append(line.replace("(host %s" % host, "(host vm").replace("(%s)" % host, "(vm)"))
    steps = [i for i, l in enumerate(lines) if re.match(r"# step \d+/\d+ ", l)]
    ranks = [i for i, l in enumerate(lines) if re.match(r"#  Rank +\d+ Pid", l)]
    drop = set(steps[1:-1]) | set(ranks[4:])
    out = []
    for i, l in enumerate(lines):
        if i in drop:
            if i - 1 not in drop:
                out.append("# ... (one line per step)" if i in steps else
                           "#  Rank   ... (one line per rank)")
            continue
        out.append(l)
    return out


def run(command, binary, cwd, env):
    r = subprocess.run(argv_of(command, binary), cwd=cwd, env=env, capture_output=True, text=True,
                       timeout=600)
    return r.returncode, r.stdout + r.stderr


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--binary", default=os.path.join(REPO, "build", "moebench"))
    p.add_argument("--write", action="store_true", help="rewrite the output blocks")
    p.add_argument("--only", help="one markdown file")
    a = p.parse_args()
    binary = os.path.abspath(a.binary)
    env = dict(os.environ, OMPI_MCA_rmaps_base_oversubscribe="1")
    if os.geteuid() == 0:
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    files = [os.path.abspath(a.only)] if a.only else markdown_files()
    changed = 0
    with tempfile.TemporaryDirectory() as tmp:
        prepare(binary, tmp, env)
        for path in files:
            with open(path) as f:
                text = f.read()
            edits = []
            for ex in examples(text):
                command, documented, span = ex
                if command in CHECKED_ELSEWHERE:
                    print("%s: skipped (%s)" % (os.path.relpath(path, REPO),
                                                CHECKED_ELSEWHERE[command]))
                    continue
                rc, printed = run(command, binary, tmp, env)
                new = excerpt_of(tidy(printed), ex.excerpt)
                print("%s: exit %d, %d lines: %s" % (os.path.relpath(path, REPO), rc, len(new),
                                                     command))
                if new != documented:
                    edits.append((span, "\n".join(new) + "\n"))
            changed += len(edits)
            if a.write and edits:
                for (start, end), body in sorted(edits, reverse=True):
                    text = text[:start] + body + text[end:]
                with open(path, "w") as f:
                    f.write(text)
    print("%d block(s) %s" % (changed, "rewritten" if a.write else "would change (--write)"))


if __name__ == "__main__":
    main()
