#include "harness/cli/options.hpp"

#include <CLI/CLI.hpp>

#include "harness/core/error.hpp"

namespace moebench {

namespace {

void add_workload_flags(CLI::App* app, WorkloadFlags& w) {
  app->add_option("--preset", w.preset, "built-in model: deepseek-v3, deepseek-v3-tiny");
  app->add_option("--model-config", w.model_config,
                  "Hugging Face config.json of the DeepSeek-V3 family (instead of --preset)");
  app->add_option("--seq-len", w.seq_len, "tokens per sequence (default 4096, tiny preset 128)");
  app->add_option("--micro-batch", w.micro_batch, "sequences per rank per step (default 1)");
  app->add_option("--layers", w.layers, "transformer layers to instantiate (default: all)");
  app->add_option("--dense-layers", w.dense_layers,
                  "of which dense (default: the model's proportion)");
  app->add_option("--attention", w.attention, "on|off (default on)");
  app->add_option("--routing", w.routing, "router|balanced|zipf:S (default balanced)");
  app->add_option("--ep", w.ep, "expert-parallel size: experts split over N consecutive ranks");
  app->add_option("--ranks-per-node", w.ranks_per_node,
                  "emulate nodes of K ranks (default 0: the real nodes)");
  app->add_option("--grad-reduce", w.grad_reduce, "allreduce|reduce-scatter (ZeRO-1)");
  app->add_option("--optimizer", w.optimizer, "adamw|none (default adamw)");
  app->add_option("--lr", w.adamw.lr, "AdamW learning rate");
  app->add_option("--adam-beta1", w.adamw.beta1, "AdamW beta1");
  app->add_option("--adam-beta2", w.adamw.beta2, "AdamW beta2");
  app->add_option("--adam-eps", w.adamw.eps, "AdamW epsilon");
  app->add_option("--weight-decay", w.adamw.weight_decay, "AdamW decoupled weight decay");
  app->add_option("--seed", w.seed, "seed of every weight and input (default 1234)");
  app->add_option("--backend", w.backend, "compute backend (default cpu)");
  app->add_option("--comm", w.comm, "communication backend (default mpi)");
  app->add_option("--blas-threads", w.blas_threads, "BLAS threads per rank (default 1)");
}

RoutingSpec routing_or_usage(const std::string& s) {
  return parse_routing(s);
}

bool on_off(const std::string& flag, const std::string& v) {
  if (v == "on") return true;
  if (v == "off") return false;
  throw UsageError(flag + " " + v + ": expected on or off");
}

}  // namespace

CliOptions parse_command_line(int argc, const char* const* argv) {
  CliOptions o;
  o.argv.assign(argv, argv + argc);
  CLI::App app{
      "moebench: DeepSeek-V3-shaped MoE training steps, expert- and data-parallel, measured per "
      "GPU",
      "moebench"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "help for every command");

  CLI::App* run = app.add_subcommand("run", "run training steps and write a run report");
  add_workload_flags(run, o.workload);
  run->add_option("--warmup", o.warmup, "untimed steps first (default 3)");
  run->add_option("--steps", o.steps, "timed steps (default 10)");
  run->add_flag("--verify", o.verify,
                "check one step against a single-process reference of the global batch");
  run->add_option("--out", o.out, "write the JSON run report here (atomically)");
  run->add_flag("--quiet", o.quiet, "no table on stdout");
  run->add_option("--test-corrupt-dispatch", o.test_corrupt_dispatch_rank,
                  "testing only: corrupt one dispatched value received by this rank")
      ->group("");  // hidden

  CLI::App* plan = app.add_subcommand("plan", "accounting and per-rank memory, without running");
  add_workload_flags(plan, o.workload);
  plan->add_option("--world", o.world, "number of ranks (GPUs) to plan for (default 1)");
  plan->add_flag("--json", o.json, "print JSON instead of text");
  plan->add_option("--out", o.out, "also write the JSON here");

  app.add_subcommand("presets", "list the built-in models");
  CLI::App* validate = app.add_subcommand("validate", "check run reports against the schema");
  validate->add_option("files", o.files, "run report files")->required();
  app.add_subcommand("version", "print the version");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    o.command = Command::help;
    o.help_text = app.get_subcommands().empty() ? app.help() : app.get_subcommands()[0]->help();
    return o;
  } catch (const CLI::CallForAllHelp&) {
    o.command = Command::help;
    o.help_text = app.help("", CLI::AppFormatMode::All);
    return o;
  } catch (const CLI::ParseError& e) {
    std::string what = e.what();
    const std::string sub =
        app.get_subcommands().empty() ? "" : app.get_subcommands()[0]->get_name();
    if (what.empty()) what = e.get_name();
    throw UsageError(what + " (see `moebench " + (sub.empty() ? "" : sub + " ") + "--help`)");
  }

  const std::string name = app.get_subcommands()[0]->get_name();
  o.command = name == "run"        ? Command::run
              : name == "plan"     ? Command::plan
              : name == "presets"  ? Command::presets
              : name == "validate" ? Command::validate
                                   : Command::version;
  if (o.command == Command::run || o.command == Command::plan) {
    if (o.workload.preset.empty() == o.workload.model_config.empty()) {
      throw UsageError(
          "give exactly one of --preset NAME (deepseek-v3, deepseek-v3-tiny) or --model-config "
          "FILE");
    }
    on_off("--attention", o.workload.attention);
    routing_or_usage(o.workload.routing);
    if (o.workload.grad_reduce != "allreduce" && o.workload.grad_reduce != "reduce-scatter") {
      throw UsageError("--grad-reduce " + o.workload.grad_reduce +
                       ": expected allreduce or reduce-scatter");
    }
    if (o.workload.optimizer != "adamw" && o.workload.optimizer != "none") {
      throw UsageError("--optimizer " + o.workload.optimizer + ": expected adamw or none");
    }
    if (o.world < 1) throw UsageError("--world " + std::to_string(o.world) + ": must be >= 1");
  }
  return o;
}

RunConfig resolve_run_config(const CliOptions& o, int world) {
  const WorkloadFlags& w = o.workload;
  RunConfig c;
  if (!w.preset.empty()) {
    c.model = preset(w.preset);
  } else {
    c.model = load_model_config(w.model_config);
  }
  validate(c.model, c.model.name);
  std::int64_t seq = 4096;
  for (const PresetInfo& p : preset_list()) {
    if (p.name == w.preset) seq = p.default_seq_len;
  }
  c.workload.seq_len = w.seq_len.value_or(seq);
  c.workload.micro_batch = w.micro_batch;
  c.workload.layers = w.layers.value_or(c.model.num_hidden_layers);
  if (c.workload.layers >= 1 && c.workload.layers <= c.model.num_hidden_layers) {
    c.workload.dense_layers =
        w.dense_layers.value_or(default_dense_layers(c.model, c.workload.layers));
  } else {
    c.workload.dense_layers = w.dense_layers.value_or(0);
  }
  c.workload.attention = on_off("--attention", w.attention);
  c.workload.routing = parse_routing(w.routing);
  c.layout.world = world;
  c.layout.ep = w.ep;
  c.layout.ranks_per_node = w.ranks_per_node;
  c.grad_reduce =
      w.grad_reduce == "reduce-scatter" ? GradReduce::reduce_scatter : GradReduce::allreduce;
  c.optimizer = w.optimizer == "none" ? Optimizer::none : Optimizer::adamw;
  c.adamw = w.adamw;
  c.seed = w.seed;
  c.warmup = o.warmup;
  c.steps = o.steps;
  c.verify = o.verify;
  c.backend = w.backend;
  c.comm = w.comm;
  c.blas_threads = w.blas_threads;
  c.test_corrupt_dispatch_rank = o.test_corrupt_dispatch_rank;
  validate(c);
  if (c.comm != "mpi") {
    throw UsageError("--comm " + c.comm + ": not built into this binary (available: mpi)");
  }
  return c;
}

}  // namespace moebench
