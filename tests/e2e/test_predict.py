"""`moebench predict`: every recipe's prediction beside its published figure, the JSON against
reports/predict.schema.json, the scaling line, bad requests (exit 2 with one line), a recipe priced
without its all-to-all overlap, a calibration from a measured cpu run that reproduces that run, and
`run --system --calibrate`'s expected section naming the phases an injected slowdown made slow."""

import json
import os
import re
import tempfile

import moebench_e2e as e2e

EXIT_USAGE = e2e.EXIT_USAGE


def predict_validator(ctx):
    import jsonschema  # imported here so a missing module fails a test, not the whole file

    with open(os.path.join(ctx.repo, "reports", "predict.schema.json")) as f:
        return jsonschema.Draft7Validator(json.load(f))


def check_one_line_usage(r, what):
    e2e.check(r.rc == EXIT_USAGE, "%s: exit 2" % what, r)
    e2e.check(r.stderr.startswith("moebench: ") and len(r.stderr.strip().splitlines()) == 1,
              "%s: one line on stderr" % what, r)
    e2e.check(r.stdout == "", "%s: nothing on stdout" % what, r)


def test_every_recipe_beside_its_published_figure(ctx):
    r = e2e.run_moebench(ctx, ["recipes", "--json"], timeout=30)
    recipes = json.loads(r.stdout)
    r = e2e.run_moebench(ctx, ["systems", "--json"], timeout=30)
    host_link = {s["name"]: s["host_link_bandwidth_bytes_per_s"]["value"]
                 for s in json.loads(r.stdout)}
    validator = predict_validator(ctx)
    for rec in recipes:
        name = rec["name"]
        r = e2e.run_moebench(ctx, ["predict", "--recipe", name, "--json"], timeout=60)
        e2e.check(r.rc == 0, "predict --recipe %s" % name, r)
        doc = json.loads(r.stdout)
        errors = [e.message for e in validator.iter_errors(doc)]
        e2e.check(not errors, "%s: schema: %s" % (name, errors[:3]))
        gpus = [p["gpus"] for p in doc["points"]]
        e2e.check(gpus == [rec["gpus"], 4 * rec["gpus"], 32 * rec["gpus"]],
                  "%s: the default GPU counts %r" % (name, gpus))
        first = doc["points"][0]["prediction"]
        # The phases of the critical rank add up to its step (sums of floats: 1e-9).
        e2e.check_close(sum(first["phase_time_s"].values()), first["step_s"], 1e-9,
                        "%s: phases add up" % name)
        e2e.check(doc["trainer"]["offload"] == rec["offload"],
                  "%s: the recipe's offload %r" % (name, doc["trainer"]["offload"]))
        # The expert input's offload is priced at the system's host link, and costs nothing
        # where each copy is shorter than the layer's pass it hides under (a ratio of the
        # report's own floats: 1e-12).
        for point in doc["points"]:
            o = point["prediction"]["expert_input_offload"]
            e2e.check((o is not None) == ("expert_fc1" in rec["offload"]),
                      "%s at %d GPUs: expert_input_offload %r" % (name, point["gpus"], o))
            if o is None:
                continue
            e2e.check_close(o["copy_s"], o["bytes_per_layer"] / host_link[doc["system"]], 1e-12,
                            "%s: the copy at the host link's bandwidth" % name)
            hidden = o["copy_s"] < min(o["layer_forward_s"], o["layer_backward_s"])
            e2e.check((o["exposed_s"] == 0) == hidden,
                      "%s at %d GPUs: exposed %r where hidden is %r" % (
                          name, point["gpus"], o["exposed_s"], hidden))
        pub = doc["published"]
        e2e.check(pub["tflops_per_gpu"] == rec["tflops_per_gpu"], "%s: published figure" % name)
        e2e.check_close(pub["predicted_over_published"],
                        first["tflops_per_gpu"] / rec["tflops_per_gpu"], 1e-12,
                        "%s: the ratio is the prediction over the published figure" % name)
        r = e2e.run_moebench(ctx, ["predict", "--recipe", name], timeout=60)
        e2e.check(r.rc == 0 and re.search(r"^# published: [0-9.]+ TFLOP/s/GPU at %d GPUs; "
                                          r"predicted / published [0-9.]+" % rec["gpus"],
                                          r.stdout, re.M),
                  "%s: the published figure beside the prediction" % name, r)
        # --explain says what the recipe offloads and how each is priced, and only for a
        # recipe that offloads: the expert input's copies against the layer's passes, the
        # optimizer states at nothing.
        r = e2e.run_moebench(ctx, ["predict", "--recipe", name, "--gpus", str(rec["gpus"]),
                                   "--explain"], timeout=60)
        line = "#   the recipe's offload to host memory (%s):" % ", ".join(rec["offload"])
        e2e.check(r.rc == 0 and (line in r.stdout) == bool(rec["offload"]) and
                  ("offload to host memory" in r.stdout) == bool(rec["offload"]),
                  "%s: --explain names the offload %r" % (name, rec["offload"]), r)
        if "expert_fc1" in rec["offload"]:
            o = doc["points"][0]["prediction"]["expert_input_offload"]
            line = ("#     expert_fc1: %.3f GB a MoE layer and micro-batch each way, %.2f ms at "
                    "the host link's %.0f GB/s, under the layer's forward of %.2f ms and "
                    "backward of %.2f ms: %.3f s of the step exposed (in experts)" % (
                        o["bytes_per_layer"] / 1e9, o["copy_s"] * 1e3,
                        host_link[doc["system"]] / 1e9, o["layer_forward_s"] * 1e3,
                        o["layer_backward_s"] * 1e3, o["exposed_s"]))
            e2e.check(line in r.stdout, "%s: --explain prices the expert input's copies as "
                      "the JSON does: %r" % (name, line), r)
        if "optimizer_states" in rec["offload"]:
            e2e.check("#     optimizer_states: priced at nothing, as the Megatron-LM commit "
                      "that published the row never called its offloader" in r.stdout,
                      "%s: --explain says why the optimizer states cost nothing" % name, r)


def test_readme_lists_this_builds_ratios(ctx):
    # docs/predicting.md: one row per recipe with the predicted and published
    # TFLOP/s and their ratio, as this build predicts them (to the README's rounding).
    with open(os.path.join(ctx.repo, "docs", "predicting.md")) as f:
        rows = re.findall(r"^\| `([\w-]+)` \| ([\w-]+) \| (\d+) \| (\d+) \| ([0-9.]+) \|",
                          f.read(), re.M)
    r = e2e.run_moebench(ctx, ["recipes", "--json"], timeout=30)
    names = [rec["name"] for rec in json.loads(r.stdout)]
    e2e.check(sorted(row[0] for row in rows) == sorted(names),
              "docs/predicting.md lists every recipe once: %r" % [row[0] for row in rows])
    for name, system, predicted, published, ratio in rows:
        r = e2e.run_moebench(ctx, ["predict", "--recipe", name, "--json"], timeout=60)
        doc = json.loads(r.stdout)
        tflops = doc["points"][0]["prediction"]["tflops_per_gpu"]
        e2e.check(doc["system"] == system, "%s: system %s" % (name, system))
        e2e.check(abs(tflops - int(predicted)) <= 0.5, "%s: predicted %s, this build %.1f" %
                  (name, predicted, tflops))
        e2e.check(abs(doc["published"]["tflops_per_gpu"] - int(published)) <= 0.5,
                  "%s: published %s" % (name, published))
        e2e.check(abs(doc["published"]["predicted_over_published"] - float(ratio)) <= 0.005,
                  "%s: ratio %s, this build %.3f" % (name, ratio,
                                                      doc["published"]["predicted_over_published"]))


def test_gb300_scaling_and_explanation(ctx):
    r = e2e.run_moebench(ctx, ["predict", "--recipe", "gb300-mxfp8-256", "--explain"], timeout=60)
    e2e.check(r.rc == 0, "predict --explain", r)
    m = re.search(r"^# from 256 to 1024 GPUs: ([0-9.]+)% per-GPU efficiency, limited by (\w+)",
                  r.stdout, re.M)
    e2e.check(m is not None, "the 256 to 1,024 GPU efficiency and what limits it", r)
    e2e.check(0 < float(m.group(1)) <= 100.5, "an efficiency in percent", r)
    e2e.check("# the step at 256 GPUs" in r.stdout and "#   experts" in r.stdout,
              "--explain lists the step's terms", r)
    with tempfile.TemporaryDirectory() as tmp:
        png = os.path.join(tmp, "p.png")
        r = e2e.run_moebench(ctx, ["predict", "--recipe", "gb300-mxfp8-256", "--plot", png],
                             timeout=120)
        e2e.check(r.rc == 0 and "# plot: %s" % png in r.stdout, "--plot draws", r)
        with open(png, "rb") as f:
            e2e.check(f.read(8) == b"\x89PNG\r\n\x1a\n", "a PNG")
        e2e.check(os.listdir(tmp) == ["p.png"], "no temporary JSON left: %r" % os.listdir(tmp))
    # On another system than the row's, the published figure is not compared.
    r = e2e.run_moebench(ctx, ["predict", "--recipe", "gb300-mxfp8-256", "--system", "b300-hgx",
                               "--json"], timeout=60)
    doc = json.loads(r.stdout)
    e2e.check(doc["published"]["predicted_over_published"] is None and
              "not b300-hgx" in doc["published"]["source"], "no ratio on another system", r)
    e2e.check(all(p["recipe"].startswith(("b300",)) for p in doc["published_points"]),
              "only the system's own published rows are drawn", r)


def test_bad_requests(ctx):
    with tempfile.TemporaryDirectory() as tmp:
        bad = os.path.join(tmp, "bad.json")
        with open(bad, "w") as f:
            f.write('{"name": "x"}')
        notjson = os.path.join(tmp, "run.json")
        with open(notjson, "w") as f:
            f.write("not json")
        cases = [
            (["--recipe", "gb300-mxfp8-256", "--gpus", "100"], "does not divide"),
            (["--preset", "deepseek-v3-tiny", "--system", bad], "--system"),
            (["--preset", "deepseek-v3-tiny", "--system", "nope"], "not a built-in system"),
            (["--preset", "deepseek-v3-tiny"], "give --system"),
            (["--preset", "deepseek-v3-tiny", "--system", "cpu", "--gpus", "2", "--calibrate",
              notjson], "--calibrate"),
            (["--preset", "deepseek-v3-tiny", "--system", "h100-hgx", "--precision", "fp8",
              "--fp8-recipe", "mxfp8"], "no MXFP8 peak"),
            (["--recipe", "mlm-gb200-mxfp8-256", "--ep-comm-overlap", "maybe"],
             "expected on or off"),
            (["--preset", "deepseek-v3-tiny", "--system", "cpu", "--ep-comm-overlap", "on"],
             "give --recipe"),
        ]
        for args, expected in cases:
            r = e2e.run_moebench(ctx, ["predict"] + args, timeout=60)
            check_one_line_usage(r, " ".join(args))
            e2e.check(expected in r.stderr, "%s: says %r" % (" ".join(args), expected), r)


# DeepSeek's own layout on 2,048 H800s (the issue 47 acceptance line), which needs more than an
# H800 in moebench's step.
DEEPSEEK_H800 = ["--system", "h800-deepseek", "--gpus", "2048", "--pp", "16", "--ep", "64",
                 "--micro-batch", "1", "--global-batch", "15360", "--seq-len", "4096",
                 "--preset", "deepseek-v3", "--precision", "fp8", "--fp8-recipe", "blockwise",
                 "--routing", "random", "--grad-reduce", "reduce-scatter", "--pipeline-layout",
                 "Et*4|(tttt|)*14tmL"]


def test_memory_is_a_statement_not_a_refusal(ctx):
    validator = predict_validator(ctx)
    r = e2e.run_moebench(ctx, ["predict"] + DEEPSEEK_H800 + ["--json"], timeout=60)
    e2e.check(r.rc == 0, "a layout larger than the GPU is priced, not refused", r)
    doc = json.loads(r.stdout)
    errors = [e.message for e in validator.iter_errors(doc)]
    e2e.check(not errors, "schema: %s" % errors[:3])
    point = doc["points"][0]
    mem = point["memory"]
    e2e.check(point["prediction"]["tokens_per_s_per_gpu"] > 0, "a price", r)
    own, trainer = mem["moebench_step"], mem["trainer"]
    gpu = mem["gpu_memory_bytes"]
    e2e.check(gpu == 80e9, "the H800's 80 GB", r)
    for name, view in (("moebench_step", own), ("trainer", trainer)):
        e2e.check(view["fits"] == (view["max_rank_bytes"] <= gpu), "%s: fits says the sum" % name)
    e2e.check(not own["fits"] and own["to_fit"], "moebench's step does not fit, and says with "
              "what it would: %r" % own.get("to_fit"), r)
    e2e.check(trainer["max_rank_bytes"] < own["max_rank_bytes"],
              "Transformer Engine keeps less than moebench's step", r)
    # What it names does fit, by the same model: the flags are real flags of predict.
    r2 = e2e.run_moebench(ctx, ["predict"] + DEEPSEEK_H800 + own["to_fit"].split() + ["--json"],
                          timeout=60)
    e2e.check(r2.rc == 0 and json.loads(r2.stdout)["points"][0]["memory"]["moebench_step"]["fits"],
              "with %s moebench's step fits" % own["to_fit"], r2)
    # DeepSeek's own savings (its report, sections 3.2.3 and 3.3.3: RMSNorm and MLA's
    # up-projections recomputed, SwiGLU's output recomputed from its cached inputs, AdamW's moments
    # in BF16) with Transformer Engine's FP8 activations fit the H800.
    r3 = e2e.run_moebench(ctx, ["predict"] + DEEPSEEK_H800 +
                          ["--recompute", "layernorm,mla_up_proj,moe_act",
                           "--optimizer-state-dtype", "bf16", "--json"], timeout=60)
    e2e.check(r3.rc == 0 and json.loads(r3.stdout)["points"][0]["memory"]["trainer"]["fits"],
              "DeepSeek's savings: the trainer's estimate fits its GPU", r3)
    # The text says both and what would fit.
    r = e2e.run_moebench(ctx, ["predict"] + DEEPSEEK_H800, timeout=60)
    e2e.check(r.rc == 0 and "own(GiB)" in r.stdout and "TE(GiB)" in r.stdout and
              "it fits with --" in r.stdout, "the table's two memory columns and the fix", r)
    # A GPU system implies the cuda backend and its precisions: bf16 without --backend.
    r = e2e.run_moebench(ctx, ["predict", "--preset", "deepseek-v3", "--system", "gb300-nvl72",
                               "--gpus", "64", "--ep", "64", "--precision", "bf16"], timeout=60)
    e2e.check(r.rc == 0, "--precision bf16 on a GPU system without --backend", r)
    r = e2e.run_moebench(ctx, ["predict", "--preset", "deepseek-v3", "--system", "h100-hgx",
                               "--gpus", "8", "--ep", "8", "--json"], timeout=60)
    e2e.check(r.rc == 0 and not json.loads(r.stdout)["points"][0]["memory"]["fits"],
              "the whole model on 8 H100s: priced, said not to fit", r)


def test_trainer_features_are_refused_by_name(ctx):
    cases = [(["--tp", "2"], "tensor parallelism"),
             (["--tensor-model-parallel-size", "2"], "tensor parallelism"),
             (["--sequence-parallel"], "sequence parallelism"),
             (["--recompute-granularity", "full"], "full-layer recompute"),
             (["--pipeline-schedule", "dualpipe"], "DualPipe"),
             (["--use-torch-fsdp2"], "FSDP"),
             (["--use-megatron-fsdp"], "FSDP"),
             (["--optimizer", "muon"], "Muon")]
    base = {"predict": ["--preset", "deepseek-v3-tiny", "--system", "cpu", "--gpus", "2",
                        "--ep", "2"],
            "plan": ["--preset", "deepseek-v3-tiny", "--world", "2", "--ep", "2"],
            "run": ["--preset", "deepseek-v3-tiny", "--ep", "2", "--steps", "1"]}
    for command, args in base.items():
        for flags, feature in cases:
            r = e2e.run_moebench(ctx, [command] + args + flags, timeout=60)
            check_one_line_usage(r, "%s %s" % (command, " ".join(flags)))
            e2e.check(feature in r.stderr, "%s %s: names %s" % (command, flags, feature), r)
    # A refused feature is named first, even on a line that lacks a model.
    r = e2e.run_moebench(ctx, ["predict", "--system", "cpu", "--tp", "2"], timeout=60)
    check_one_line_usage(r, "predict --tp 2 without a model")
    e2e.check("tensor parallelism" in r.stderr, "names tensor parallelism first", r)
    # The features' neutral values are taken.
    r = e2e.run_moebench(ctx, ["predict"] + base["predict"] +
                         ["--tp", "1", "--recompute-granularity", "selective",
                          "--pipeline-schedule", "1f1b"], timeout=60)
    e2e.check(r.rc == 0, "--tp 1, selective recompute, 1f1b", r)


def test_scaling_names_what_it_computes(ctx):
    common = ["predict", "--preset", "deepseek-v3", "--system", "gb300-nvl72", "--ep", "64",
              "--gpus", "64,256", "--json"]
    r = e2e.run_moebench(ctx, common + ["--global-batch", "256"], timeout=60)
    doc = json.loads(r.stdout)
    e2e.check(doc["scaling_mode"] == "strong" and
              [p["global_batch"] for p in doc["points"]] == [256, 256],
              "one --global-batch at every count: strong scaling", r)
    r = e2e.run_moebench(ctx, common + ["--global-batch-per-gpu", "4"], timeout=60)
    doc = json.loads(r.stdout)
    e2e.check(doc["scaling_mode"] == "weak" and
              [p["global_batch"] for p in doc["points"]] == [256, 1024],
              "--global-batch-per-gpu: weak scaling", r)
    r = e2e.run_moebench(ctx, common[:-1] + ["--global-batch", "256"], timeout=60)
    e2e.check("strong-eff" in r.stdout and "weak-eff" not in r.stdout, "the column says so", r)
    r = e2e.run_moebench(ctx, common + ["--global-batch", "256", "--global-batch-per-gpu", "4"],
                         timeout=60)
    check_one_line_usage(r, "--global-batch with --global-batch-per-gpu")
    # With a recipe it replaces the recipe's batch per GPU (16 on GB300's row) at every count.
    r = e2e.run_moebench(ctx, ["predict", "--recipe", "gb300-mxfp8-256", "--gpus", "256,1024",
                               "--global-batch-per-gpu", "8", "--json"], timeout=60)
    doc = json.loads(r.stdout)
    e2e.check(r.rc == 0 and [p["global_batch"] for p in doc["points"]] == [2048, 8192] and
              doc["scaling_mode"] == "weak", "--global-batch-per-gpu with --recipe", r)
    # A batch the layout cannot take is named by the flag the user gave.
    r = e2e.run_moebench(ctx, common + ["--global-batch-per-gpu", "1", "--micro-batch", "2"],
                         timeout=60)
    check_one_line_usage(r, "--global-batch-per-gpu 1 --micro-batch 2")
    e2e.check("--global-batch-per-gpu 1" in r.stderr, "names the flag given", r)


def test_measured_figures_price_the_recipe(ctx):
    # Issue 48's first acceptance line: a measured cpu run's hardware figures in place of the
    # datasheet x efficiency, the recipe's trainer kept.
    validator = predict_validator(ctx)
    with tempfile.TemporaryDirectory() as tmp:
        run = os.path.join(tmp, "RUN.json")
        r = e2e.run_moebench(ctx, ["run", "--recipe", "gb300-mxfp8-256", "--preset",
                                   "deepseek-v3-tiny", "--precision", "fp32", "--ep", "2",
                                   "--system", "cpu", "--out", run, "--quiet"], np=4, timeout=180)
        e2e.check(r.rc == 0, "the measured run", r)
        r = e2e.run_moebench(ctx, ["predict", "--recipe", "gb300-mxfp8-256", "--system", "cpu",
                                   "--measured", run, "--json"], timeout=60)
        e2e.check(r.rc == 0, "predict --measured", r)
        doc = json.loads(r.stdout)
        errors = [e.message for e in validator.iter_errors(doc)]
        e2e.check(not errors, "schema: %s" % errors[:3])
        m = doc["measured"]
        e2e.check(m["files"] == [run] and m["precision"] == "fp32", "files and precision", r)
        e2e.check(doc["workload"]["precision"] == "fp32", "priced in the runs' precision", r)
        names = [t["name"] for t in m["terms"]]
        for want in ("dense_gemm", "grouped_gemm", "attention", "memory", "scale_out"):
            e2e.check(want in names, "%s measured: %r" % (want, names), r)
        for t in m["terms"]:
            # The figure is its definition (a product of the JSON's floats: 1e-12).
            e2e.check_close(t["measured"], t["datasheet"] * t["model_efficiency"] * t["factor"],
                            1e-12, "%s = datasheet x efficiency x factor" % t["name"])
            e2e.check(all(src.startswith(run + ": ") and "on rank " in src
                          for src in t["sources"]), "%s names its file and rank" % t["name"])
        for p in doc["points"]:
            e2e.check(p["prediction"]["tflops_per_gpu"] > 0, "a price at %d GPUs" % p["gpus"])
            e2e.check(all(p["priced_from"][n] == "measured" for n in names) and
                      p["priced_from"]["dispatcher"] == "model" and
                      p["priced_from"]["host_overhead"] == "model",
                      "measured terms and the trainer's own named", r)
        # The same without --measured: every term the model's, no measured section.
        r = e2e.run_moebench(ctx, ["predict", "--recipe", "gb300-mxfp8-256", "--system", "cpu",
                                   "--precision", "fp32", "--json"], timeout=60)
        plain = json.loads(r.stdout)
        e2e.check(plain["measured"] is None and
                  set(plain["points"][0]["priced_from"].values()) == {"model"},
                  "no --measured: the model's figures", r)
        r = e2e.run_moebench(ctx, ["predict", "--recipe", "gb300-mxfp8-256", "--system", "cpu",
                                   "--measured", run], timeout=60)
        e2e.check(r.rc == 0 and "# measured on this system" in r.stdout and
                  "#   grouped_gemm" in r.stdout, "the text lists the figures", r)
        # Bad requests: one line each.
        for args, says in (
                (["--measured", run, "--calibrate", run], "give one"),
                (["--measured", os.path.join(tmp, "none.json")], "--measured"),
                (["--measured", run, "--system", "gb300-nvl72"], "cannot measure")):
            base = ["predict", "--recipe", "gb300-mxfp8-256"]
            if "--system" not in args:
                base += ["--system", "cpu"]
            r = e2e.run_moebench(ctx, base + args, timeout=60)
            check_one_line_usage(r, " ".join(args))
            e2e.check(says in r.stderr, "%s: says %r" % (args, says), r)


def test_ep_comm_overlap_prices_the_recipe_without_it(ctx):
    # Megatron-LM's GB200 row overlaps its all-to-alls; priced without the overlap its step is
    # longer, the JSON says which was priced, and the table says it is not as the row ran.
    validator = predict_validator(ctx)
    base = ["predict", "--recipe", "mlm-gb200-mxfp8-256", "--gpus", "256"]
    docs = {}
    for value in (None, "on", "off"):
        extra = [] if value is None else ["--ep-comm-overlap", value]
        r = e2e.run_moebench(ctx, base + extra + ["--json"], timeout=60)
        e2e.check(r.rc == 0, "predict %s --json" % extra, r)
        docs[value] = json.loads(r.stdout)
        e2e.check(not list(validator.iter_errors(docs[value])), "%s: valid JSON" % extra, r)
    e2e.check(docs[None]["trainer"]["ep_comm_overlap"] is True and
              docs["on"]["trainer"]["ep_comm_overlap"] is True and
              docs["off"]["trainer"]["ep_comm_overlap"] is False, "the overlap priced")
    step = {k: d["points"][0]["prediction"]["step_s"] for k, d in docs.items()}
    e2e.check(step["on"] == step[None], "on is the recipe's own: %r" % step)
    e2e.check(step["off"] > step[None], "without the overlap the step is longer: %r" % step)
    before = docs["off"]["points"][0]["prediction"]["communication_before_overlap_s"]["dispatch"]
    exposed = docs["off"]["points"][0]["prediction"]["phase_time_s"]["dispatch"]
    e2e.check(abs(exposed - before) <= 1e-9 * before,
              "without it the dispatch is all exposed: %r vs %r" % (exposed, before))
    r = e2e.run_moebench(ctx, base + ["--ep-comm-overlap", "off"], timeout=60)
    e2e.check("# the trainer's all-to-all overlap off (--ep-comm-overlap), not as the row ran"
              in r.stdout, "the table says the trainer is not the row's", r)
    r = e2e.run_moebench(ctx, base, timeout=60)
    e2e.check("--ep-comm-overlap" not in r.stdout, "no such line for the row as it ran", r)


def test_calibration_reproduces_its_run(ctx):
    with tempfile.TemporaryDirectory() as tmp:
        run = os.path.join(tmp, "clean.json")
        flags = ["--preset", "deepseek-v3-tiny", "--ep", "2", "--layers", "2"]
        r = e2e.run_moebench(ctx, ["run", "--quiet", "--warmup", "1", "--steps", "2", "--out",
                                   run] + flags, np=2, timeout=120)
        e2e.check(r.rc == 0, "the calibration run", r)
        measured = e2e.load_report(ctx, run)["results"]["step_breakdown"]["step_time_s"]
        r = e2e.run_moebench(ctx, ["predict", "--system", "cpu", "--gpus", "2", "--calibrate",
                                   run, "--json"] + flags, timeout=60)
        e2e.check(r.rc == 0, "predict --calibrate", r)
        doc = json.loads(r.stdout)
        errors = [e.message for e in predict_validator(ctx).iter_errors(doc)]
        e2e.check(not errors, "schema: %s" % errors[:3])
        # Calibrated on itself, the model gives back the measured step: every phase scaled to
        # its measured time, the waiting added (sums of floats: 1e-9).
        e2e.check_close(doc["points"][0]["prediction"]["step_s"], measured, 1e-9,
                        "the calibration run predicted from itself")
        e2e.check(doc["calibration"]["report"] == run, "the calibration is named")
        # One layer fewer: less time, predicted from the same calibration.
        r = e2e.run_moebench(ctx, ["predict", "--system", "cpu", "--gpus", "2", "--calibrate",
                                   run, "--json", "--preset", "deepseek-v3-tiny", "--ep", "2",
                                   "--layers", "1"], timeout=60)
        fewer = json.loads(r.stdout)["points"][0]["prediction"]["step_s"]
        e2e.check(0 < fewer < measured, "one layer fewer predicts a shorter step", r)
        # A cpu run cannot calibrate a GPU system.
        r = e2e.run_moebench(ctx, ["predict", "--recipe", "gb300-mxfp8-256", "--calibrate", run],
                             timeout=60)
        check_one_line_usage(r, "a cpu run calibrating gb300")
        # A run with an injected fault measured the fault, not the system: refused, naming it.
        slow = os.path.join(tmp, "slow.json")
        r = e2e.run_moebench(ctx, ["run", "--quiet", "--warmup", "1", "--steps", "2", "--out",
                                   slow, "--inject", "slow:rank=0,factor=3"] + flags, np=2,
                             timeout=120)
        e2e.check(r.rc == 0, "the run with a slowed rank", r)
        r = e2e.run_moebench(ctx, ["predict", "--system", "cpu", "--gpus", "2", "--calibrate",
                                   slow] + flags, timeout=60)
        check_one_line_usage(r, "a run with an injected fault calibrating")
        e2e.check("injected a fault (--inject slow:rank=0" in r.stderr, "names the fault", r)


def test_report_predicts_each_run(ctx):
    import jsonschema

    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for np in (1, 2):
            path = os.path.join(tmp, "run-np%d.json" % np)
            r = e2e.run_moebench(ctx, ["run", "--quiet", "--preset", "deepseek-v3-tiny",
                                       "--layers", "2", "--warmup", "1", "--steps", "3",
                                       "--out", path], np=np, timeout=120)
            e2e.check(r.rc == 0, "run at %d" % np, r)
            paths.append(path)
        out = os.path.join(tmp, "scaling.json")
        r = e2e.run_moebench(ctx, ["report"] + paths + ["--system", "cpu", "--calibrate",
                                                        paths[0], "--out", out], timeout=60)
        e2e.check(r.rc == 0 and "# predicted on cpu (calibrated from %s)" % paths[0] in r.stdout,
                  "report --system --calibrate prints the predictions", r)
        with open(out) as f:
            doc = json.load(f)
        with open(os.path.join(ctx.repo, "reports", "scaling.schema.json")) as f:
            errors = [e.message for e in
                      jsonschema.Draft7Validator(json.load(f)).iter_errors(doc)]
        e2e.check(not errors, "scaling schema: %s" % errors[:3])
        runs = doc["predicted"]["runs"]
        e2e.check([x["gpus"] for x in runs] == [1, 2], "one prediction per run", r)
        # The calibration run predicted from itself: its rank's median step (what calibrates)
        # against the median of the steps' slowest rank (what the report measures) differ only
        # in which step and rank they take, within a noisy machine's 25%.
        own = runs[0]
        e2e.check(0.8 < own["measured_step_s"] / own["predicted_step_s"] < 1.25,
                  "the calibration run's prediction %r" % own)
        r = e2e.run_moebench(ctx, ["report"] + paths + ["--calibrate", paths[0]], timeout=60)
        check_one_line_usage(r, "report --calibrate without --system")


def test_expected_section_names_slowed_phases(ctx):
    with tempfile.TemporaryDirectory() as tmp:
        clean = os.path.join(tmp, "clean.json")
        flags = ["--preset", "deepseek-v3-tiny", "--ep", "2", "--layers", "2", "--warmup", "1",
                 "--steps", "3"]
        r = e2e.run_moebench(ctx, ["run", "--quiet", "--out", clean] + flags, np=2, timeout=120)
        e2e.check(r.rc == 0, "the clean run", r)
        e2e.check("expected" not in e2e.load_report(ctx, clean), "no expected section without "
                  "--system")
        slow = os.path.join(tmp, "slow.json")
        r = e2e.run_moebench(ctx, ["run", "--out", slow, "--system", "cpu", "--calibrate", clean,
                                   "--inject", "slow:rank=0,factor=8"] + flags, np=2,
                             timeout=180)
        e2e.check(r.rc == 0, "the slowed run", r)
        doc = e2e.load_report(ctx, slow)  # the expected section validates against the schema
        expected = doc["expected"]
        e2e.check(expected["system"] == "cpu" and expected["calibration"] == clean,
                  "system and calibration named")
        slow_phases = [p["phase"] for p in expected["phases"] if p["slow"]]
        # Rank 0 computes 8x as slowly, so its compute phases are far over the 1.25x mark; a busy
        # machine can slow the clean run's phases too (its calibration), by less than that 6x
        # margin nearly always: most of the five largest must be named.
        big = ("attention", "dense_mlp", "experts", "shared_expert", "head")
        e2e.check(sum(phase in slow_phases for phase in big) >= 3,
                  "most of %r marked slow: %r" % (big, slow_phases), r)
        for p in expected["phases"]:
            if p["slow"]:
                e2e.check(p["ratio"] > 1.25, "slow means over 1.25x")
        named = re.search(r"^# expected: slow compute: (.*): check the compute", r.stdout, re.M)
        e2e.check(named and all("%s at " % p in named.group(1) for p in slow_phases
                                if p in big), "the health section names them", r)
        for phase in slow_phases:
            e2e.check(re.search(r"^   %s .*<< [0-9.]+x expected$" % phase, r.stdout, re.M),
                      "the table marks %s" % phase, r)
        r = e2e.run_moebench(ctx, ["run", "--calibrate", clean] + flags, np=2, timeout=60)
        e2e.check(r.rc == EXIT_USAGE and "give --system too" in r.stderr,
                  "--calibrate without --system", r)


TESTS = [test_every_recipe_beside_its_published_figure, test_readme_lists_this_builds_ratios,
         test_gb300_scaling_and_explanation,
         test_bad_requests, test_memory_is_a_statement_not_a_refusal,
         test_trainer_features_are_refused_by_name, test_scaling_names_what_it_computes,
         test_measured_figures_price_the_recipe, test_ep_comm_overlap_prices_the_recipe_without_it,
         test_calibration_reproduces_its_run, test_report_predicts_each_run,
         test_expected_section_names_slowed_phases]

if __name__ == "__main__":
    e2e.run_main(TESTS)
