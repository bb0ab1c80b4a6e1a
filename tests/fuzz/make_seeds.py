#!/usr/bin/env python3
"""Writes the fuzz targets' first seed corpus (tests/fuzz/corpus/), as committed:

  config/  the published DeepSeek-V3 config.json, and each hostile edit of it from
           tests/e2e/test_hostile_config.py (the huge ones made small: a fuzzer's inputs stay
           short), plus a few presets' shapes;
  cli/     command lines, one argument per line after a first byte that picks the world size;
  report/  run reports written by the real binary (1, 2 and 4 ranks, one failed), alone and
           joined by "@@" lines, as fuzz_report.cpp reads them.

Inputs a fuzzer finds are added beside these by tests/fuzz/run.sh --merge (config and cli), and
any crash it finds is kept there once fixed, so ctest replays it forever after.

  tests/fuzz/make_seeds.py --binary build/moebench
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
MAX_SEED = 64 * 1024


def write(folder, name, data):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode("latin-1"))


def config_seeds(out):
    sys.path.insert(0, os.path.join(REPO, "tests", "e2e"))
    import test_hostile_config as hostile
    with open(os.path.join(REPO, "tests", "data", "deepseek-v3.config.json")) as f:
        base = json.load(f)
    write(out, "deepseek-v3.json", json.dumps(base, indent=2))
    write(out, "deepseek-v3-small.json", json.dumps(dict(
        base, hidden_size=256, num_hidden_layers=4, first_k_dense_replace=1, vocab_size=1024,
        moe_intermediate_size=128, intermediate_size=512)))
    written = 0
    for i, (name, make, _) in enumerate(hostile.CASES):
        text = make(base)
        if len(text) > MAX_SEED:
            continue  # the 10 MB string and the 200,000-deep nesting: small forms below
        write(out, "hostile%02d.json" % i, text)
        written += 1
    write(out, "nested-2000.json",
          json.dumps(dict(base, hidden_size="@@")).replace('"@@"', "[" * 2000 + "]" * 2000))
    write(out, "long-string.json", json.dumps(dict(base, vocab_size="x" * 4000)))
    return written + 4


CLI = [
    ["plan", "--preset", "deepseek-v3", "--ep", "8"],
    ["plan", "--preset", "deepseek-v3", "--world", "256", "--ep", "64", "--pp", "8",
     "--global-batch", "2048", "--json"],
    ["plan", "--recipe", "gb300-mxfp8-256"],
    ["plan", "--preset", "deepseek-v3", "--world", "16", "--pp", "4", "--vp", "2",
     "--pipeline-layout", "Et*3|t*4|t*4|t*3mL", "--layers", "14"],
    ["run", "--preset", "deepseek-v3-tiny", "--ep", "2", "--pp", "2", "--global-batch", "8"],
    ["run", "--preset", "deepseek-v3-tiny", "--routing", "zipf:1.2", "--precision", "fp8",
     "--overlap", "on", "--grad-reduce", "zero1", "--bucket-mb", "1"],
    ["run", "--preset", "deepseek-v3-tiny", "--head", "off", "--mtp", "0", "--attention", "off"],
    ["run", "--preset", "deepseek-v3-tiny", "--inject", "hang:rank=1,step=2,phase=dispatch",
     "--timeout", "5"],
    ["run", "--preset", "deepseek-v3-tiny", "--inject", "corrupt:rank=0,phase=combine"],
    ["run", "--preset", "deepseek-v3-tiny", "--seq-len", "99999999999999999999"],
    ["phases", "--json"],
    ["recipes"],
    ["presets"],
    ["--help"],
    ["run", "--bogus"],
]


def cli_seeds(out):
    for i, args in enumerate(CLI):
        world = bytes([(4 * i + 3) % 64])
        write(out, "cli%02d.txt" % i, world + "\n".join(args).encode())
    return len(CLI)


def report_seeds(out, binary):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    reports = []
    with tempfile.TemporaryDirectory() as tmp:
        for np, extra in [(1, []), (2, ["--ep", "2"]), (4, ["--ep", "2"]),
                          (2, ["--ep", "2", "--inject", "hang:rank=1,step=3", "--timeout", "3"])]:
            path = os.path.join(tmp, "r%d.json" % len(reports))
            cmd = ["mpirun", "--oversubscribe", "-np", str(np), binary, "run", "--preset",
                   "deepseek-v3-tiny", "--seq-len", "32", "--layers", "1", "--warmup", "1",
                   "--steps", "3", "--verify", "--quiet", "--out", path] + extra
            subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           timeout=120)
            with open(path) as f:
                reports.append(f.read())
    names = ["np1", "np2", "np4", "np2-failed"]
    for name, text in zip(names, reports):
        write(out, name + ".json", text)
    write(out, "np1-np2.json", reports[0] + "\n@@\n" + reports[1])
    write(out, "np1-np2-np4.json", "\n@@\n".join(reports[:3]))
    write(out, "np2-np4-failed.json", "\n@@\n".join(reports[1:]))
    return len(reports) + 3


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--binary", required=True, help="the moebench binary (for the run reports)")
    a = p.parse_args()
    corpus = os.path.join(HERE, "corpus")
    n = config_seeds(os.path.join(corpus, "config"))
    m = cli_seeds(os.path.join(corpus, "cli"))
    k = report_seeds(os.path.join(corpus, "report"), os.path.abspath(a.binary))
    print("seeds: %d config, %d cli, %d report" % (n, m, k))


if __name__ == "__main__":
    main()
