"""End-to-end: `moebench report` refuses bad inputs, each with its own one-line message naming the
file and the field, exit code 2, and no output written (not even a temporary file)."""

import atexit
import json
import os
import shutil
import tempfile

import moebench_e2e as e2e
import report_fixtures as fx
from moebench_e2e import check

_state = {}


def workdir():
    if "dir" not in _state:
        _state["dir"] = tempfile.mkdtemp(prefix="moebench-e2e-report-errors-")
        atexit.register(shutil.rmtree, _state["dir"], True)
    return _state["dir"]


def real(ctx):
    """One real run at 2 ranks and a synthetic copy at 4 GPUs: a valid pair to spoil."""
    if "real" not in _state:
        path = os.path.join(workdir(), "real-np2.json")
        r = e2e.run_moebench(ctx, ["run", "--preset", "deepseek-v3-tiny", "--ep", 2, "--warmup", 1,
                                   "--steps", 5, "--quiet", "--out", path], np=2, timeout=300)
        check(r.rc == 0, "real run failed", r)
        with open(path) as f:
            _state["real"] = json.load(f)
        _state["real_path"] = path
        _state["four"] = fx.write(fx.synthetic_run(_state["real"], 4, 0.01, ep=2),
                                  os.path.join(workdir(), "synthetic-4.json"))
    return _state["real"]


def write_text(name, text):
    path = os.path.join(workdir(), name)
    with open(path, "w") as f:
        f.write(text)
    return path


def write_doc(name, doc):
    return write_text(name, json.dumps(doc))


def refuse(ctx, inputs, expected, extra=()):
    """Runs report with every output requested into an empty folder; checks exit 2, the message
    and that the folder stays empty."""
    out = tempfile.mkdtemp(dir=workdir())
    r = e2e.run_moebench(ctx, ["report"] + inputs + list(extra) + [
        "--out", os.path.join(out, "s.json"), "--markdown", os.path.join(out, "s.md"),
        "--plot", os.path.join(out, "s.png")], timeout=60)
    check(r.rc == e2e.EXIT_USAGE, "expected exit 2", r)
    lines = r.stderr.strip().splitlines()
    check(len(lines) == 1, "one line on stderr", r)
    check(expected in lines[0], "message should contain %r" % expected, r)
    check(os.listdir(out) == [], "nothing may be written, found %s" % os.listdir(out))
    return lines[0]


def test_empty_file(ctx):
    real(ctx)
    p = write_text("empty.json", "")
    refuse(ctx, [_state["real_path"], p], p + ": empty file: not a run report")


def test_not_json(ctx):
    real(ctx)
    p = write_text("notes.json", "this is not JSON\n")
    refuse(ctx, [_state["real_path"], p], p + ": not JSON: ")


def test_truncated(ctx):
    real(ctx)
    with open(_state["real_path"]) as f:
        text = f.read()
    p = write_text("truncated.json", text[: len(text) // 2])
    refuse(ctx, [_state["real_path"], p], p + ": truncated JSON")


def test_wrong_kind(ctx):
    real(ctx)
    plan = e2e.run_moebench(ctx, ["plan", "--preset", "deepseek-v3-tiny", "--json"]).stdout
    p = write_text("plan.json", plan)
    refuse(ctx, [_state["real_path"], p],
           p + ': /kind is "moebench.plan", expected "moebench.run": not a run report')


def test_schema_version_from_the_future(ctx):
    doc = dict(real(ctx), schema_version=2)
    p = write_doc("future.json", doc)
    refuse(ctx, [_state["real_path"], p],
           p + ": /schema_version is 2, from a newer moebench: this one reads run reports of "
           "schema version 1")


def test_missing_field(ctx):
    doc = json.loads(json.dumps(real(ctx)))
    del doc["results"]["tflops_per_gpu"]
    p = write_doc("missing.json", doc)
    line = refuse(ctx, [_state["real_path"], p], p + ": not a valid run report (run.schema.json): "
                  "/results: ")
    check("tflops_per_gpu" in line, "the message names the missing field: " + line)


def test_mixed_workloads(ctx):
    doc = fx.synthetic_run(real(ctx), 4, 0.01, ep=2)
    doc["config"]["model"]["hidden_size"] = 512
    p = write_doc("other-model.json", doc)
    refuse(ctx, [_state["real_path"], p],
           "runs of different workloads: config.model.hidden_size is 256 in %s (2 GPUs) but 512 "
           "in %s (4 GPUs)" % (_state["real_path"], p))
    doc = fx.synthetic_run(real(ctx), 4, 0.01, ep=2)
    doc["config"]["workload"]["routing"] = "router"
    p = write_doc("other-routing.json", doc)
    refuse(ctx, [_state["real_path"], p], "config.workload.routing is \"balanced\"")


def test_per_gpu_work_differs(ctx):
    doc = fx.synthetic_run(real(ctx), 4, 0.01, ep=2, micro_batch=2)
    p = write_doc("mb2.json", doc)
    refuse(ctx, [_state["real_path"], p],
           "per-GPU work differs: config.workload.micro_batch is 1 in %s (2 GPUs) but 2 in %s "
           "(4 GPUs); pass --allow-mixed micro_batch" % (_state["real_path"], p))


def test_single_run(ctx):
    real(ctx)
    refuse(ctx, [_state["real_path"]],
           "a scaling report needs runs at two or more GPU counts; got 1 run, all at 2 GPUs")


def test_missing_file_and_bad_flags(ctx):
    real(ctx)
    refuse(ctx, [_state["real_path"], os.path.join(workdir(), "nope.json")],
           "nope.json: no such file or directory")
    refuse(ctx, [_state["real_path"], _state["four"]], "--baseline 3: no run at that GPU count "
           "(sizes: 2, 4)", extra=["--baseline", "3"])
    refuse(ctx, [_state["real_path"], _state["four"]], "--allow-mixed layers: expected seq_len, "
           "micro_batch or ep", extra=["--allow-mixed", "layers"])
    refuse(ctx, [_state["real_path"], _state["four"]], "--claim-efficiency 0: must be a number > 0",
           extra=["--claim-efficiency", "0"])


def test_forged_reports_are_refused(ctx):
    """Figures that agree with one another but not with physics (issue 27): each is exit 2 naming
    the field and the bound."""
    real(ctx)

    def forged(name, change):
        doc = fx.synthetic_run(real(ctx), 4, 0.01, ep=2)
        change(doc)
        return write_doc(name, doc)

    def too_fast(doc):
        # Step times of 1e-290 s with the rates made to agree: 1e297 TFLOP/s.
        res, acc = doc["results"], doc["accounting"]["instantiated"]
        res["step_time_s"] = {k: (1e-290 if k in ("median", "mean", "min", "max", "p95") else v)
                              for k, v in res["step_time_s"].items()}
        res["step_times_s"] = [1e-290] * len(res["step_times_s"])
        res["tflops_per_gpu"] = acc["flops_per_step"] / (1e-290 * 4) / 1e12
        res["tokens_per_s_per_gpu"] = doc["config"]["workload"]["tokens_per_step"] / (1e-290 * 4)

    def many_times(doc):
        doc["results"]["step_times_s"] = doc["results"]["step_times_s"] * 100000

    def many_ranks(doc):
        doc["results"]["per_rank"] = doc["results"]["per_rank"] * 25000

    def more_steps(doc):
        doc["status"]["steps_completed"] = doc["status"]["steps_requested"] + 1

    def one_node(doc):
        # A million ranks on one node, the rates made to agree with that world.
        world, res = 1000000, doc["results"]
        doc["parallel"]["world"] = world
        doc["parallel"]["nodes"] = 1
        median = res["step_time_s"]["median"]
        res["tflops_per_gpu"] = (doc["accounting"]["instantiated"]["flops_per_step"] /
                                 (median * world) / 1e12)
        res["tokens_per_s_per_gpu"] = (doc["config"]["workload"]["tokens_per_step"] /
                                       (median * world))

    for name, change, expected in (
            ("too-fast.json", too_fast, "beyond any accelerator's dense peak"),
            ("many-times.json", many_times, "/results/step_times_s has 500000 entries but "
                                            "/status/steps_completed is 5"),
            ("many-ranks.json", many_ranks, "/results/per_rank has 100000 entries"),
            ("more-steps.json", more_steps, "/status/steps_completed 6 exceeds "
                                            "/status/steps_requested 5"),
            ("one-node.json", one_node, "/parallel/world 1000000 on /parallel/nodes 1: a node "
                                        "holds between 1 and 4096 ranks")):
        p = forged(name, change)
        line = refuse(ctx, [_state["real_path"], p], p + ": ")
        check(expected in line, "%s: the message should say %r: %s" % (name, expected, line))


def test_valid_pair_is_accepted(ctx):
    """The control: the same two files without spoiling give exit 0 and all three outputs."""
    real(ctx)
    out = tempfile.mkdtemp(dir=workdir())
    r = e2e.run_moebench(ctx, ["report", _state["real_path"], _state["four"], "--quiet",
                               "--out", os.path.join(out, "s.json"),
                               "--markdown", os.path.join(out, "s.md"),
                               "--plot", os.path.join(out, "s.png")], timeout=60)
    check(r.rc == 0, "valid inputs", r)
    check(sorted(os.listdir(out)) == ["s.json", "s.md", "s.png"], "all outputs written")


if __name__ == "__main__":
    e2e.run_main([test_valid_pair_is_accepted, test_empty_file, test_not_json, test_truncated,
                  test_wrong_kind, test_schema_version_from_the_future, test_missing_field,
                  test_mixed_workloads, test_per_gpu_work_differs, test_single_run,
                  test_missing_file_and_bad_flags, test_forged_reports_are_refused])
