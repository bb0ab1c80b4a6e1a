#!/usr/bin/env python3
"""The tree reads nothing outside itself: no build, test or script file refers to a path outside
the source tree, so a fresh clone in a folder with nothing beside it builds and passes its tests.

It reads every file git tracks (and untracked ones it does not ignore) except prose and data
(Markdown, JSON) and flags:
  - a path into a developer's workspace: "../shared", "shared/data", "shared/reference", "/work/";
  - a path built from the source tree's root or a file's own folder that climbs out of the tree:
    ${CMAKE_SOURCE_DIR}/.., ${CMAKE_CURRENT_SOURCE_DIR}/../.. past the root (CMake), a script's
    "$(dirname "${BASH_SOURCE[0]}")" or a variable set from it followed by too many "../" (shell),
    os.path.join(<repo>, "..", ...) (Python), MOEBENCH_REPO_DIR or MOEBENCH_SOURCE_DIR followed by
    "/.." (C++).

    check_self_contained.py --repo DIR
    check_self_contained.py --self-test   (the two lines that once read ../shared must fail)

Exit status 0 when nothing is found, 1 with one line per finding otherwise.
"""

import argparse
import os
import posixpath
import re
import subprocess
import sys

SELF = "tests/layers/check_self_contained.py"  # names the patterns it looks for
SKIP_SUFFIXES = (".md", ".json", ".png", ".svg", ".txt.in")
WORKSPACE = re.compile(r"\.\./shared\b|\bshared/(data|reference|hooks)\b|(?<![\w.])/work/")
CMAKE_ROOTED = re.compile(
    r"\$\{(CMAKE_SOURCE_DIR|CMAKE_CURRENT_SOURCE_DIR|CMAKE_CURRENT_LIST_DIR|PROJECT_SOURCE_DIR)\}"
    r"((?:/[^\s\"';)$]*)*)")
SCRIPT_DIR = re.compile(r'\$\(\s*dirname\s+"?\$\{BASH_SOURCE\[0\]\}"?\s*\)((?:/[^\s"\')$]*)*)')
SHELL_ASSIGN = re.compile(r'^\s*(?:local\s+|readonly\s+)?(\w+)=\S*?\$\(cd\s+"?' +
                          r'(\$\(\s*dirname\s+"?\$\{BASH_SOURCE\[0\]\}"?\s*\)|\$\w+|\$\{\w+\})' +
                          r'((?:/[^\s"\')$]*)*)"?\s*&&\s*pwd\s*\)')
SHELL_VAR = re.compile(r'\$\{?(\w+)\}?((?:/[^\s"\')$}]*)+)')
PY_JOIN_UP = re.compile(r'os\.path\.join\(\s*(?:self\.)?(?:repo|source|root)\w*\s*,\s*["\']\.\.["\']')
CPP_ROOT_UP = re.compile(r'MOEBENCH_(?:REPO|SOURCE)_DIR\)?\s*(?:\+\s*)?"/\.\.')


def tracked_files(repo):
    try:
        out = subprocess.run(["git", "-C", repo, "ls-files", "-co", "--exclude-standard", "-z"],
                             check=True, capture_output=True).stdout.decode()
        return sorted(f for f in out.split("\0") if f)
    except (OSError, subprocess.CalledProcessError):
        files = []
        for dirpath, dirnames, filenames in os.walk(repo):
            dirnames[:] = [d for d in dirnames if not d.startswith((".git", "build"))]
            files += [os.path.relpath(os.path.join(dirpath, f), repo) for f in filenames]
        return sorted(files)


def escapes(base_dir, path):
    """Whether base_dir (relative to the root, "" for the root) joined with path leaves it."""
    joined = posixpath.normpath(posixpath.join(base_dir or ".", path.lstrip("/")))
    return joined == ".." or joined.startswith("../")


def check_text(rel, text):
    findings = []
    here = posixpath.dirname(rel)
    is_cmake = rel.endswith((".cmake", "CMakeLists.txt"))
    is_shell = (rel.endswith(".sh") or rel.startswith(".ci/") or
                text.startswith("#!/usr/bin/env bash"))
    shell_dirs = {}  # variable -> folder (relative to the root) it holds
    for number, line in enumerate(text.splitlines(), 1):
        where = "%s:%d" % (rel, number)
        m = WORKSPACE.search(line)
        if m:
            findings.append("%s: refers to %r, outside the source tree" % (where, m.group(0)))
        if is_cmake:
            for var, path in CMAKE_ROOTED.findall(line):
                base = "" if var in ("CMAKE_SOURCE_DIR", "PROJECT_SOURCE_DIR") else here
                if path and escapes(base, path):
                    findings.append("%s: ${%s}%s leaves the source tree" % (where, var, path))
        if is_shell:
            a = SHELL_ASSIGN.match(line)
            if a:
                var, origin, path = a.groups()
                if "BASH_SOURCE" in origin:
                    base = here
                else:
                    base = shell_dirs.get(origin.strip("${}"))
                if base is not None:
                    folder = posixpath.normpath(posixpath.join(base or ".", path.lstrip("/")))
                    if folder == ".." or folder.startswith("../"):
                        findings.append("%s: %s is set outside the source tree" % (where, var))
                    else:
                        shell_dirs[var] = "" if folder == "." else folder
                continue
            for path in SCRIPT_DIR.findall(line):
                if path and escapes(here, path):
                    findings.append("%s: the script's folder%s leaves the source tree" %
                                    (where, path))
            for var, path in SHELL_VAR.findall(line):
                if var in shell_dirs and escapes(shell_dirs[var], path):
                    findings.append("%s: $%s%s leaves the source tree" % (where, var, path))
        if rel.endswith(".py") and PY_JOIN_UP.search(line):
            findings.append("%s: joins '..' to the source tree's root" % where)
        if rel.endswith((".cpp", ".hpp", ".h", ".cu")) and CPP_ROOT_UP.search(line):
            findings.append("%s: climbs out of the source tree's root" % where)
    return findings


def check_tree(repo):
    findings = []
    for rel in tracked_files(repo):
        if rel.endswith(SKIP_SUFFIXES) or rel.startswith("tests/data/") or rel == SELF:
            continue
        path = os.path.join(repo, rel)
        if not os.path.isfile(path):
            continue
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except UnicodeDecodeError:
            continue  # binary
        findings += check_text(rel, text)
    return findings


def self_test():
    bad = {
        # The two lines this check was written for (tests/CMakeLists.txt and moebench_e2e.py).
        "tests/CMakeLists.txt":
            '  MOEBENCH_TEST_DATA_DIR="${CMAKE_SOURCE_DIR}/../shared/data"\n',
        "tests/e2e/moebench_e2e.py":
            'self.shared_data = os.path.normpath(os.path.join(self.repo, "..", "shared", "data"))\n',
        "tests/x/CMakeLists.txt": 'set(d "${CMAKE_CURRENT_SOURCE_DIR}/../../../elsewhere")\n',
        "harness/scripts/a.sh": 'here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"\n'
                                'cat "$here/../../../notes.txt"\n',
        "tests/b.sh": 'cat "$(dirname "${BASH_SOURCE[0]}")/../../data"\n',
        "tests/unit/a_test.cpp": 'std::string(MOEBENCH_REPO_DIR) + "/../sibling/file"\n',
    }
    good = {
        "tests/CMakeLists.txt": '  MOEBENCH_TEST_DATA_DIR="${CMAKE_CURRENT_SOURCE_DIR}/data"\n',
        "tests/x/CMakeLists.txt": 'set(d "${CMAKE_CURRENT_SOURCE_DIR}/../../reports")\n',
        "harness/scripts/a.sh": 'repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"\n'
                                'cat "$repo/README.md"\n',
        "tests/e2e/moebench_e2e.py": 'self.test_data = os.path.join(self.repo, "tests", "data")\n',
    }
    failures = []
    for rel, text in bad.items():
        if not check_text(rel, text):
            failures.append("not flagged: %s: %s" % (rel, text.strip()))
    for rel, text in good.items():
        found = check_text(rel, text)
        if found:
            failures.append("flagged wrongly: %s" % found)
    for f in failures:
        print("self-test FAILED: " + f)
    print("self-test: %d checks, %d failed" % (len(bad) + len(good), len(failures)))
    return 1 if failures else 0


def main(argv):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repo")
    p.add_argument("--self-test", action="store_true")
    a = p.parse_args(argv)
    if a.self_test:
        return self_test()
    if not a.repo:
        p.error("--repo is required (or --self-test)")
    findings = check_tree(os.path.abspath(a.repo))
    for f in findings:
        print(f)
    print("self-contained: %d findings" % len(findings))
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
