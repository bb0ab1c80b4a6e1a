"""Hostile model config files: each gives exit 2 and one short line, never a crash, a hang, a
flood of output or an output file, in `plan` and in `run`.

The cases are this file's table: edits of the published DeepSeek-V3 config.json
(tests/data/deepseek-v3.config.json), written to a temporary directory (the three large ones,
200,000-deep nesting and a 10 MB string, are generated rather than kept).
"""

import json
import os
import tempfile

import moebench_e2e as e2e

USAGE = 2
MAX_LINE = 400  # one line, quoting at most an excerpt of the bad value


def edit(key, value):
    def f(base):
        d = dict(base)
        if value is DELETE:
            d.pop(key)
        else:
            d[key] = value
        return json.dumps(d)
    return f


def raw(text):
    return lambda base: text


def replace(key, text):
    """The key's value replaced by raw JSON text (for what json.dumps cannot write)."""
    def f(base):
        d = dict(base)
        d[key] = "@@"
        return json.dumps(d).replace('"@@"', text)
    return f


DELETE = object()

CASES = [
    ("number beyond double", replace("hidden_size", "1e400"), "number overflow"),
    ("nested 200000 deep", replace("hidden_size", "[" * 200000 + "]" * 200000),
     "must be a positive integer, got an array"),
    ("10 MB string", edit("vocab_size", "x" * 10000000), "characters)"),
    ("hidden_size 2^63-1", edit("hidden_size", 2**63 - 1), "exceeds the limit"),
    ("hidden_size 2^64", replace("hidden_size", str(2**64)), "must be a positive integer"),
    ("vocab 2^62", edit("vocab_size", 2**62), "exceeds the limit"),
    ("a billion layers", edit("num_hidden_layers", 10**9), "exceeds the limit"),
    ("negative experts", edit("n_routed_experts", -1), "must be a positive integer"),
    ("zero heads", edit("num_attention_heads", 0), "must be a positive integer"),
    ("q_lora_rank a string", edit("q_lora_rank", "x"), "q_lora_rank"),
    ("kv_lora_rank fractional", edit("kv_lora_rank", 1.5), "must be a positive integer"),
    ("rope_theta negative", edit("rope_theta", -1), "must be a positive number"),
    ("rms_norm_eps zero", edit("rms_norm_eps", 0), "must be a positive number"),
    ("rms_norm_eps a string", edit("rms_norm_eps", "inf"), "must be a positive number"),
    ("hidden_size true", edit("hidden_size", True), "must be a positive integer"),
    ("intermediate_size null", edit("intermediate_size", None), "must be a positive integer"),
    ("hidden_size missing", edit("hidden_size", DELETE), "missing required key 'hidden_size'"),
    ("odd rope dim", edit("qk_rope_head_dim", 63), "must be even"),
    ("zero groups", edit("n_group", 0), "must be a positive integer"),
    ("topk_group above n_group", edit("topk_group", 9), "exceeds n_group"),
    ("moe ffn 2^40", edit("moe_intermediate_size", 2**40), "exceeds the limit"),
    ("dense beyond layers", edit("first_k_dense_replace", 62), "exceeds num_hidden_layers"),
    ("1000 MTP layers", edit("num_nextn_predict_layers", 1000), "exceeds the limit"),
    ("a whole model beyond 1e15", lambda b: json.dumps(dict(
        b, hidden_size=2**20, moe_intermediate_size=2**22, num_hidden_layers=10000,
        first_k_dense_replace=3)), "beyond the 1e15 moebench counts"),
    ("top level an array", raw("[1, 2, 3]"), "expected a JSON object"),
    ("top level a string", raw('"config"'), "expected a JSON object"),
    ("empty file", raw(""), "invalid JSON"),
    ("truncated", lambda b: json.dumps(b)[:200], "invalid JSON"),
    ("NaN literal", replace("rope_theta", "NaN"), "invalid JSON"),
    ("binary garbage", raw("\x00\x01\x02\xff\xfe"), "invalid JSON"),
    ("experts not divisible by groups", edit("n_routed_experts", 250), "must be divisible"),
    ("a key given twice", lambda b: json.dumps(b)[:-1] + ', "hidden_size": 1024}',
     "key 'hidden_size' is given twice"),
    ("a nested key given twice",
     lambda b: json.dumps(b)[:-1] + ', "moebench_extra": {"fmt": 1, "fmt": 2}}',
     "key 'fmt' is given twice"),
]


def check_one(r, name, expected, out):
    e2e.check(not r.timed_out, "%s: hung" % name, r)
    e2e.check(r.rc == USAGE, "%s: expected exit %d, got %s" % (name, USAGE, r.rc), r)
    # mpirun adds its own lines about the exit; moebench's are the ones it starts.
    lines = r.moebench_lines()
    e2e.check(len(lines) == 1, "%s: expected one moebench line on stderr, got %d" %
              (name, len(lines)), r)
    e2e.check(len(lines[0]) <= MAX_LINE, "%s: a %d-character line" % (name, len(lines[0])), r)
    e2e.check(expected in lines[0], "%s: stderr should say %r" % (name, expected), r)
    e2e.check(not os.path.exists(out), "%s: an output file was written" % name)


def test_plan_and_run_refuse_every_case(ctx):
    with open(os.path.join(ctx.repo, "tests", "data", "deepseek-v3.config.json")) as f:
        base = json.load(f)
    with tempfile.TemporaryDirectory() as tmp:
        for i, (name, make, expected) in enumerate(CASES):
            path = os.path.join(tmp, "case%02d.json" % i)
            with open(path, "w", encoding="latin-1") as f:
                f.write(make(base))
            out = os.path.join(tmp, "out%02d.json" % i)
            r = e2e.run_moebench(ctx, ["plan", "--model-config", path, "--out", out], timeout=60)
            check_one(r, "plan: " + name, expected, out)
            # run reads the same file on every rank: the same line, once, and no report.
            r = e2e.run_moebench(ctx, ["run", "--model-config", path, "--layers", 1, "--steps", 1,
                                       "--out", out], np=2, timeout=60)
            check_one(r, "run: " + name, expected, out)
        r = e2e.run_moebench(ctx, ["plan", "--model-config", tmp], timeout=60)
        check_one(r, "a directory", "not a regular file", os.path.join(tmp, "none"))
        print("  %d hostile configs (+ a directory), each refused by plan and run" % len(CASES))


def test_a_misspelt_key_is_a_warning_once(ctx):
    """num_nextn_predict_layer (one edit from the key moebench reads) would drop the MTP layer
    without a word: plan and run say so once, naming both keys, and go on."""
    r = e2e.run_moebench(ctx, ["plan", "--preset", "deepseek-v3-tiny", "--json"], timeout=60)
    e2e.check(r.rc == 0, "plan --json", r)
    model = json.loads(r.stdout)["config"]["model"]
    model["num_nextn_predict_layer"] = model.pop("num_nextn_predict_layers")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "near.json")
        with open(path, "w") as f:
            json.dump(model, f)
        out = os.path.join(tmp, "r.json")
        for args, np in ((["plan", "--model-config", path], None),
                         (["run", "--model-config", path, "--steps", 1, "--warmup", 0,
                           "--seq-len", 16, "--quiet", "--out", out], 2)):
            r = e2e.run_moebench(ctx, args, np=np, timeout=120)
            e2e.check(r.rc == 0, "%s with a misspelt key: exit %s" % (args[0], r.rc), r)
            warned = r.moebench_lines("moebench: warning:")
            e2e.check(len(warned) == 1 and "'num_nextn_predict_layer' is 1 edit from "
                      "'num_nextn_predict_layers'" in warned[0],
                      "%s: expected one warning naming both keys, got %r" % (args[0], warned), r)
        e2e.check(e2e.load_report(ctx, out)["config"]["workload"]["mtp_layers"] == 0,
                  "the misspelt key is ignored, as the warning says")
    print("  a misspelt key: one warning from plan and from a 2-rank run, which go on")


TESTS = [test_plan_and_run_refuse_every_case, test_a_misspelt_key_is_a_warning_once]

if __name__ == "__main__":
    e2e.run_main(TESTS)
