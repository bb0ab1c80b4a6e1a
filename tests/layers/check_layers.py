#!/usr/bin/env python3
"""The layering check: every #include in harness/ and workloads/ against the modules and layers
that harness/layers.cmake declares (CMake writes them to <build>/moebench-layers.json).

A module may include its own headers and those of the modules it depends on, directly or through
them. Any other include of a project header fails: one that goes up a layer, one that goes
sideways to a module it does not depend on, one into a folder that belongs to no module. Every
C++ file must sit in a declared module's folder. Includes behind #if count too, so code that this
build does not compile (the cuda and nccl backends without a CUDA toolkit) is held to the same
rule. The build enforces the same through per-module include views; this reads the source.

    check_layers.py --repo DIR --manifest BUILD/moebench-layers.json
    check_layers.py --self-test      (a planted upward include, a sideways one, a file outside
                                      every module and an include behind #if must all fail)

Exit status 0 when the tree follows its layers, 1 with one line per violation otherwise.
"""

import argparse
import json
import os
import re
import shutil
import sys
import tempfile

SOURCE_SUFFIXES = (".cpp", ".hpp", ".cu", ".cuh", ".h")
ROOTS = ("harness", "workloads")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
SYSTEM_INCLUDE = re.compile(r'^\s*#\s*include\s+<([^>]+)>')
# External headers and the library a module must link (LIBS in harness/layers.cmake, its own or a
# dependency's) for the compiler to find them where nothing is installed system-wide (the device
# machine builds against carried copies: tests/device/check.sh).
# The interfaces and the backends sit below the model: whatever they share with it (element-wise,
# routing and FP8 arithmetic) lives in harness/math, and no file of theirs includes workloads/.
NO_WORKLOADS_IN = ("harness/compute/", "harness/backends/")
EXTERNAL = [("nlohmann/", "nlohmann_json"), ("CLI/", "CLI11"), ("mpi.h", "MPI::"),
            ("openssl/", "OpenSSL::")]


class Manifest:
    def __init__(self, doc):
        self.layers = doc["layers"]
        self.modules = {m["name"]: m for m in doc["modules"]}
        self.dir_to_module = {}
        for m in doc["modules"]:
            for d in m["dirs"]:
                self.dir_to_module[d.rstrip("/")] = m["name"]

    def level(self, module):
        return self.layers.index(self.modules[module]["layer"])

    def libs(self, module):
        """The libraries the module links, directly or through its dependencies."""
        out = set(self.modules[module].get("libs", []))
        for dep in self.modules[module]["deps"]:
            out |= self.libs(dep)
        return out

    def allowed(self, module, _seen=None):
        """The module and everything it depends on, directly or through its dependencies."""
        out = {module}
        for dep in self.modules[module]["deps"]:
            out |= self.allowed(dep)
        return out


def module_of(manifest, rel_path):
    return manifest.dir_to_module.get(os.path.dirname(rel_path))


def check_manifest(manifest):
    """The declared dependencies themselves: known, downwards, acyclic."""
    problems = []
    for name, m in manifest.modules.items():
        if m["layer"] not in manifest.layers:
            problems.append("module %s: unknown layer %r" % (name, m["layer"]))
            continue
        for dep in m["deps"]:
            if dep not in manifest.modules:
                problems.append("module %s depends on unknown module %s" % (name, dep))
            elif manifest.level(dep) > manifest.level(name):
                problems.append("module %s (layer %s) depends on %s, a higher layer (%s)" %
                                (name, m["layer"], dep, manifest.modules[dep]["layer"]))
    # Cycles: a depth-first walk over the dependency edges.
    state = {}

    def visit(name, path):
        if state.get(name) == "done" or name not in manifest.modules:
            return
        if state.get(name) == "open":
            problems.append("dependency cycle: " + " -> ".join(path + [name]))
            return
        state[name] = "open"
        for dep in manifest.modules[name]["deps"]:
            visit(dep, path + [name])
        state[name] = "done"

    for name in manifest.modules:
        visit(name, [])
    return problems


def source_files(repo):
    for root in ROOTS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(repo, root)):
            dirnames.sort()
            for f in sorted(filenames):
                if f.endswith(SOURCE_SUFFIXES):
                    yield os.path.relpath(os.path.join(dirpath, f), repo)


def check_tree(repo, manifest):
    """Returns (problems, statistics)."""
    problems = check_manifest(manifest)
    allowed = {name: manifest.allowed(name) for name in manifest.modules}
    files = 0
    edges = 0
    for rel in source_files(repo):
        files += 1
        module = module_of(manifest, rel)
        if module is None:
            problems.append("%s: in no module (declare its folder in harness/layers.cmake)" % rel)
            continue
        with open(os.path.join(repo, rel), encoding="utf-8", errors="replace") as f:
            lines = f.readlines()
        for number, line in enumerate(lines, 1):
            ext = SYSTEM_INCLUDE.match(line)
            if ext and "libs" in manifest.modules[module]:
                for prefix, lib in EXTERNAL:
                    if ext.group(1).startswith(prefix) and not any(
                            lib in have for have in manifest.libs(module)):
                        problems.append("%s:%d: includes <%s>, but module %s links no %s "
                                        "(LIBS in harness/layers.cmake)" %
                                        (rel, number, ext.group(1), module, lib))
            m = INCLUDE.match(line)
            if not m:
                continue
            target = m.group(1)
            if not os.path.exists(os.path.join(repo, target)):
                beside = os.path.normpath(os.path.join(os.path.dirname(rel), target))
                if os.path.exists(os.path.join(repo, beside)):
                    target = beside
                else:
                    continue  # not a project header (a generated or system one)
            if not target.startswith(tuple(r + "/" for r in ROOTS)):
                continue
            edges += 1
            to = module_of(manifest, target)
            where = "%s:%d" % (rel, number)
            if rel.startswith(NO_WORKLOADS_IN) and target.startswith("workloads/"):
                problems.append('%s: includes "%s": harness/compute and harness/backends may not '
                                "include workloads/ (shared arithmetic lives in harness/math)" %
                                (where, target))
                continue
            if to is None:
                problems.append('%s: includes "%s", which is in no module' % (where, target))
            elif to not in allowed[module]:
                if manifest.level(to) > manifest.level(module):
                    direction = "up from layer %s to layer %s" % (
                        manifest.modules[module]["layer"], manifest.modules[to]["layer"])
                else:
                    direction = "%s: module %s does not depend on %s (harness/layers.cmake)" % (
                        "sideways" if manifest.level(to) == manifest.level(module)
                        else "undeclared", module, to)
                problems.append('%s: includes "%s" of module %s, %s' %
                                (where, target, to, direction))
    return problems, {"files": files, "edges": edges, "modules": len(manifest.modules)}


def self_test():
    """The checker against a small tree with known mistakes: each must be reported, and a clean
    tree must pass."""
    doc = {
        "layers": ["core", "ops", "model"],
        "modules": [
            {"name": "core", "layer": "core", "dirs": ["harness/core"], "deps": []},
            {"name": "ops", "layer": "ops", "dirs": ["harness/math"], "deps": ["core"]},
            {"name": "side", "layer": "ops", "dirs": ["workloads/side"], "deps": ["core"]},
            {"name": "model", "layer": "model", "dirs": ["workloads/model"], "deps": ["ops"],
             "libs": []},
            {"name": "json", "layer": "model", "dirs": ["workloads/json"], "deps": ["core"],
             "libs": ["nlohmann_json::nlohmann_json"]},
            # A backend allowed to depend on side by its layer and its deps: only the folder rule
            # keeps it from including workloads/.
            {"name": "backend", "layer": "model", "dirs": ["harness/backends/cpu"],
             "deps": ["side", "ops"]},
        ],
    }
    clean = {
        "harness/core/error.hpp": "#pragma once\n",
        "harness/math/add.hpp": '#include "harness/core/error.hpp"\n',
        "workloads/side/side.hpp": '#include "harness/core/error.hpp"\n',
        "workloads/model/step.cpp": '#include "harness/math/add.hpp"\n'
                                    '#include "harness/core/error.hpp"\n#include <vector>\n',
        "workloads/json/j.cpp": '#include <nlohmann/json.hpp>\n',
    }
    planted = {
        # up: ops includes model; sideways: ops includes side, of its own layer
        "harness/math/sub.hpp": '#include "workloads/side/side.hpp"\n',
        "harness/math/add.hpp": '#include "harness/core/error.hpp"\n'
                                 '#include "workloads/model/step.hpp"\n',
        "workloads/model/step.hpp": "#pragma once\n",
        # undeclared: model does not depend on side; behind #if, which must not hide it
        "workloads/model/step.cpp": '#if defined(NEVER)\n#include "workloads/side/side.hpp"\n'
                                    "#endif\n",
        # a file in no module
        "harness/stray/stray.cpp": '#include "harness/core/error.hpp"\n',
        # an external header the module does not link
        "workloads/model/m.hpp": '#include <nlohmann/json.hpp>\n',
        # a backend including workloads/, though its module may depend on that module
        "harness/backends/cpu/b.cpp": '#include "harness/math/add.hpp"\n'
                                      '#include "workloads/side/side.hpp"\n',
    }
    failures = []

    def run(files):
        tmp = tempfile.mkdtemp(prefix="check_layers.")
        try:
            for rel, text in files.items():
                os.makedirs(os.path.join(tmp, os.path.dirname(rel)), exist_ok=True)
                with open(os.path.join(tmp, rel), "w") as f:
                    f.write(text)
            return check_tree(tmp, Manifest(doc))[0]
        finally:
            shutil.rmtree(tmp)

    got = run(clean)
    if got:
        failures.append("a clean tree was refused: %s" % got)
    got = run({**clean, **planted})
    expect = [
        ("harness/math/add.hpp:2", "up from layer ops to layer model"),
        ("workloads/model/step.cpp:2", "undeclared: module model does not depend on side"),
        ("harness/stray/stray.cpp", "in no module"),
        ("harness/math/sub.hpp:1", "sideways: module ops does not depend on side"),
        ("workloads/model/m.hpp:1", "links no nlohmann_json"),
        ("harness/backends/cpu/b.cpp:2", "may not include workloads/"),
    ]
    for where, what in expect:
        if not any(p.startswith(where) and what in p for p in got):
            failures.append("not reported: %s (%s); got %s" % (where, what, got))
    if len(got) != len(expect):
        failures.append("expected %d problems, got %d: %s" % (len(expect), len(got), got))
    bad = dict(doc)
    bad["modules"] = doc["modules"] + [
        {"name": "low", "layer": "core", "dirs": ["harness/low"], "deps": ["model"]}]
    if not any("higher layer" in p for p in check_manifest(Manifest(bad))):
        failures.append("an upward module dependency was not reported")
    cyc = {"layers": ["core"], "modules": [
        {"name": "a", "layer": "core", "dirs": ["a"], "deps": ["b"]},
        {"name": "b", "layer": "core", "dirs": ["b"], "deps": ["a"]}]}
    if not any("cycle" in p for p in check_manifest(Manifest(cyc))):
        failures.append("a dependency cycle was not reported")
    for f in failures:
        print("self-test FAILED: " + f)
    print("self-test: %d checks, %d failed" % (len(expect) + 4, len(failures)))
    return 1 if failures else 0


def main(argv):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repo", help="the source tree")
    p.add_argument("--manifest", help="<build>/moebench-layers.json")
    p.add_argument("--self-test", action="store_true")
    a = p.parse_args(argv)
    if a.self_test:
        return self_test()
    if not a.repo or not a.manifest:
        p.error("--repo and --manifest are required (or --self-test)")
    with open(a.manifest) as f:
        manifest = Manifest(json.load(f))
    problems, stats = check_tree(a.repo, manifest)
    for problem in problems:
        print(problem)
    print("layers: %d modules in %d layers (%s); %d files, %d project includes; %d problems" %
          (stats["modules"], len(manifest.layers), " -> ".join(manifest.layers), stats["files"],
           stats["edges"], len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
