// The command line: every subcommand, every rejected flag (UsageError naming it), and the
// defaults resolve_run_config fills in.
#include "harness/cli/options.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "harness/core/error.hpp"

namespace moebench {
namespace {

CliOptions parse(std::vector<const char*> args) {
  args.insert(args.begin(), "moebench");
  return parse_command_line(static_cast<int>(args.size()), args.data());
}

// The UsageError message parsing throws; "" when it throws none, so a missing throw also fails
// the checks on the message.
std::string usage_message(std::vector<const char*> args) {
  try {
    parse(std::move(args));
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST_CASE("run: every flag lands in its field") {
  const CliOptions o = parse({"run",
                              "--preset",
                              "deepseek-v3-tiny",
                              "--seq-len",
                              "64",
                              "--micro-batch",
                              "2",
                              "--layers",
                              "2",
                              "--dense-layers",
                              "1",
                              "--attention",
                              "off",
                              "--routing",
                              "zipf:1.5",
                              "--ep",
                              "2",
                              "--ranks-per-node",
                              "2",
                              "--grad-reduce",
                              "reduce-scatter",
                              "--optimizer",
                              "none",
                              "--lr",
                              "0.01",
                              "--weight-decay",
                              "0",
                              "--seed",
                              "7",
                              "--blas-threads",
                              "2",
                              "--warmup",
                              "0",
                              "--steps",
                              "2",
                              "--verify",
                              "--out",
                              "r.json",
                              "--quiet",
                              "--inject",
                              "corrupt:rank=1,step=2"});
  CHECK(o.command == Command::run);
  const WorkloadFlags& w = o.workload;
  CHECK(w.preset == "deepseek-v3-tiny");
  CHECK(w.model_config.empty());
  CHECK(w.seq_len == 64);
  CHECK(w.micro_batch == 2);
  CHECK(w.layers == 2);
  CHECK(w.dense_layers == 1);
  CHECK(w.attention == "off");
  CHECK(w.routing == "zipf:1.5");
  CHECK(w.ep == 2);
  CHECK(w.ranks_per_node == 2);
  CHECK(w.grad_reduce == "reduce-scatter");
  CHECK(w.optimizer == "none");
  CHECK(w.adamw.lr == 0.01);
  CHECK(w.adamw.weight_decay == 0.0);
  CHECK(w.seed == 7);
  CHECK(w.blas_threads == 2);
  CHECK(o.warmup == 0);
  CHECK(o.steps == 2);
  CHECK(o.verify);
  CHECK(o.out == "r.json");
  CHECK(o.quiet);
  REQUIRE(o.inject.has_value());
  CHECK(o.inject->rank == 1);
  CHECK(o.inject->step == 2);
  CHECK(o.inject->point == FaultSpec::Point::dispatch);
  CHECK(o.argv.size() == 42);
  CHECK(o.argv[1] == "run");
}

TEST_CASE("run: defaults") {
  const CliOptions o = parse({"run", "--preset", "deepseek-v3"});
  CHECK_FALSE(o.workload.seq_len.has_value());
  CHECK_FALSE(o.workload.layers.has_value());
  CHECK_FALSE(o.workload.dense_layers.has_value());
  CHECK(o.workload.micro_batch == 1);
  CHECK(o.workload.attention == "on");
  CHECK(o.workload.routing == "balanced");
  CHECK(o.workload.ep == 1);
  CHECK(o.workload.grad_reduce == "allreduce");
  CHECK(o.workload.optimizer == "adamw");
  CHECK(o.workload.seed == 1234);
  CHECK(o.warmup == 3);
  CHECK(o.steps == 10);
  CHECK_FALSE(o.verify);
  CHECK_FALSE(o.inject.has_value());
}

TEST_CASE("plan, presets, validate, version and help") {
  CliOptions o = parse({"plan", "--preset", "deepseek-v3", "--world", "16", "--ep", "8", "--json",
                        "--out", "p.json"});
  CHECK(o.command == Command::plan);
  CHECK(o.world == 16);
  CHECK(o.workload.ep == 8);
  CHECK(o.json);
  CHECK(o.out == "p.json");
  CHECK(parse({"presets"}).command == Command::presets);
  CHECK(parse({"version"}).command == Command::version);
  o = parse({"validate", "a.json", "b.json"});
  CHECK(o.command == Command::validate);
  CHECK(o.files == std::vector<std::string>{"a.json", "b.json"});

  o = parse({"predict", "--recipe", "gb300-mxfp8-256", "--system", "gb300-nvl72", "--gpus",
             "1024,256", "--calibrate", "r.json", "--explain", "--plot", "p.png", "--json", "--out",
             "o.json"});
  CHECK(o.command == Command::predict);
  CHECK(o.workload.recipe == "gb300-mxfp8-256");
  CHECK(o.system == "gb300-nvl72");
  CHECK(o.gpus == std::vector<int>{1024, 256});
  CHECK(o.calibrate == "r.json");
  CHECK(o.explain);
  CHECK(o.plot == "p.png");
  CHECK(o.json);
  CHECK(o.out == "o.json");
  o = parse({"run", "--preset", "deepseek-v3-tiny", "--system", "cpu", "--calibrate", "r.json"});
  CHECK(o.system == "cpu");
  CHECK(o.calibrate == "r.json");
  o = parse({"report", "a.json", "--system", "cpu", "--calibrate", "r.json"});
  CHECK(o.report.system == "cpu");
  CHECK(o.report.calibrate == "r.json");

  o = parse({"--help"});
  CHECK(o.command == Command::help);
  CHECK(contains(o.help_text, "run"));
  CHECK(contains(o.help_text, "predict"));
  CHECK(contains(o.help_text, "plan"));
  o = parse({"run", "--help"});
  CHECK(o.command == Command::help);
  CHECK(contains(o.help_text, "--warmup"));
  o = parse({"--help-all"});
  CHECK(o.command == Command::help);
  CHECK(contains(o.help_text, "--grad-reduce"));
}

TEST_CASE("bad flags throw a UsageError naming the flag") {
  std::string m = usage_message({"run", "--preset", "deepseek-v3", "--attention", "maybe"});
  CHECK(contains(m, "--attention"));
  CHECK(contains(m, "maybe"));
  m = usage_message({"run", "--preset", "deepseek-v3", "--grad-reduce", "foo"});
  CHECK(contains(m, "--grad-reduce"));
  CHECK(contains(m, "reduce-scatter"));  // what would be valid
  m = usage_message({"run", "--preset", "deepseek-v3", "--optimizer", "sgd"});
  CHECK(contains(m, "--optimizer"));
  m = usage_message({"plan", "--preset", "deepseek-v3", "--routing", "bogus"});
  CHECK(contains(m, "--routing"));
  m = usage_message({"run", "--preset", "deepseek-v3", "--routing", "zipf:-1"});
  CHECK(contains(m, "--routing"));
  m = usage_message({"run"});
  CHECK(contains(m, "--preset"));
  CHECK(contains(m, "--model-config"));
  m = usage_message({"plan", "--preset", "deepseek-v3", "--model-config", "x.json"});
  CHECK(contains(m, "--preset"));
  CHECK(contains(m, "--model-config"));
  m = usage_message({"run", "--preset", "deepseek-v3", "--bogus"});
  CHECK(contains(m, "--bogus"));
  m = usage_message({"run", "--preset", "deepseek-v3", "--ep", "abc"});
  CHECK(contains(m, "--ep"));
  m = usage_message({"run", "--preset", "deepseek-v3", "--steps", "1.5"});
  CHECK(contains(m, "--steps"));
  m = usage_message({"plan", "--preset", "deepseek-v3", "--world", "0"});
  CHECK(contains(m, "--world"));
  m = usage_message({"validate"});
  CHECK(contains(m, "files"));
  CHECK(!usage_message({}).empty());  // a subcommand is required
  m = usage_message({"presets", "--preset", "deepseek-v3"});
  CHECK(contains(m, "--preset"));
}

TEST_CASE("--overlap and --grad-bucket-mb: defaults, values and bad values") {
  RunConfig c = resolve_run_config(parse({"run", "--preset", "deepseek-v3-tiny"}), 2);
  CHECK(c.overlap);
  CHECK(c.grad_bucket_bytes == std::int64_t{80} << 20);
  c = resolve_run_config(
      parse({"run", "--preset", "deepseek-v3-tiny", "--overlap", "off", "--grad-bucket-mb", "0.5"}),
      2);
  CHECK_FALSE(c.overlap);
  CHECK(c.grad_bucket_bytes == 524288);
  std::string m = usage_message({"run", "--preset", "deepseek-v3", "--overlap", "yes"});
  CHECK(contains(m, "--overlap yes"));
  CHECK(contains(m, "on or off"));
  m = usage_message({"run", "--preset", "deepseek-v3", "--grad-bucket-mb", "-2"});
  CHECK(contains(m, "--grad-bucket-mb -2"));
  CHECK(contains(m, "from 0"));
  m = usage_message({"run", "--preset", "deepseek-v3", "--grad-bucket-mb", "inf"});
  CHECK(contains(m, "--grad-bucket-mb"));
}

TEST_CASE("an unknown subcommand is named in the error, with the valid ones") {
  // Fails today: CLI11 reports "A subcommand is required", which names neither the mistyped
  // command nor the valid ones.
  const std::string m = usage_message({"frobnicate"});
  CHECK(contains(m, "frobnicate"));
  CHECK(contains(m, "run"));
}

RunConfig resolve(std::vector<const char*> args, int world = 1) {
  args.insert(args.begin(), "run");
  return resolve_run_config(parse(std::move(args)), world);
}

TEST_CASE("resolve_run_config fills in the defaults") {
  RunConfig c = resolve({"--preset", "deepseek-v3-tiny"});
  CHECK(c.model.name == "deepseek-v3-tiny");
  CHECK(c.workload.seq_len == 128);  // the tiny preset's own default
  CHECK(c.workload.layers == 4);     // all layers
  CHECK(c.workload.dense_layers == 1);
  CHECK(c.layout.world == 1);
  CHECK(c.layout.ep == 1);
  CHECK(c.grad_reduce == GradReduce::allreduce);
  CHECK(c.optimizer == Optimizer::adamw);
  CHECK(c.workload.routing.mode == RoutingMode::balanced);
  CHECK(c.workload.attention);

  c = resolve({"--preset", "deepseek-v3"}, 8);
  CHECK(c.workload.seq_len == 4096);
  CHECK(c.workload.layers == 61);
  CHECK(c.workload.dense_layers == 3);
  CHECK(c.layout.world == 8);

  // Dense layers in the model's proportion: 2 x 1/4 rounds to 1, 4 x 3/61 to 0, 20 x 3/61 to 1.
  CHECK(resolve({"--preset", "deepseek-v3-tiny", "--layers", "2"}).workload.dense_layers == 1);
  CHECK(resolve({"--preset", "deepseek-v3", "--layers", "4"}).workload.dense_layers == 0);
  CHECK(resolve({"--preset", "deepseek-v3", "--layers", "20"}).workload.dense_layers == 1);
  CHECK(resolve({"--preset", "deepseek-v3", "--layers", "4", "--dense-layers", "2"})
            .workload.dense_layers == 2);

  c = resolve({"--preset",      "deepseek-v3-tiny",
               "--seq-len",     "32",
               "--attention",   "off",
               "--routing",     "router",
               "--grad-reduce", "reduce-scatter",
               "--optimizer",   "none",
               "--ep",          "2",
               "--seed",        "9",
               "--steps",       "4",
               "--warmup",      "1",
               "--verify"},
              4);
  CHECK(c.workload.seq_len == 32);
  CHECK_FALSE(c.workload.attention);
  CHECK(c.workload.routing.mode == RoutingMode::router);
  CHECK(c.grad_reduce == GradReduce::reduce_scatter);
  CHECK(c.optimizer == Optimizer::none);
  CHECK(c.layout.ep == 2);
  CHECK(c.layout.edp() == 2);
  CHECK(c.seed == 9);
  CHECK(c.steps == 4);
  CHECK(c.warmup == 1);
  CHECK(c.verify);
}

TEST_CASE("resolve_run_config reads --model-config and rejects impossible layouts") {
  const std::string file = std::string(MOEBENCH_TEST_DATA_DIR) + "/deepseek-v3.config.json";
  RunConfig c = resolve({"--model-config", file.c_str(), "--layers", "2"});
  CHECK(c.model.hidden_size == 7168);
  CHECK(c.workload.seq_len == 4096);
  CHECK(c.workload.layers == 2);

  auto message = [](std::vector<const char*> args, int world) -> std::string {
    try {
      resolve(std::move(args), world);
    } catch (const UsageError& e) {
      return e.what();
    }
    return "";
  };
  std::string m = message({"--preset", "deepseek-v3-tiny", "--ep", "3"}, 4);
  CHECK(contains(m, "--ep"));
  CHECK(contains(m, "1, 2, 4"));  // the valid values
  m = message({"--preset", "deepseek-v3-tiny", "--layers", "5"}, 1);
  CHECK(contains(m, "--layers"));
  m = message({"--preset", "deepseek-v3-tiny", "--layers", "2", "--dense-layers", "3"}, 1);
  CHECK(contains(m, "--dense-layers"));
  m = message({"--preset", "deepseek-v3-tiny", "--comm", "nccl"}, 1);
  CHECK(contains(m, "--comm"));
  m = message({"--preset", "deepseek-v3-tiny", "--micro-batch", "0"}, 1);
  CHECK(contains(m, "--micro-batch"));
  m = message({"--preset", "deepseek-v3-tiny", "--ranks-per-node", "3"}, 4);
  CHECK(contains(m, "--ranks-per-node"));
  m = message({"--preset", "no-such-model"}, 1);
  CHECK(contains(m, "no-such-model"));
  m = message({"--model-config", "/nonexistent/config.json"}, 1);
  CHECK(contains(m, "/nonexistent/config.json"));
}

}  // namespace
}  // namespace moebench

namespace moebench {
namespace {

TEST_CASE("resolve_run_config: --precision per backend, --timeout, --comm against --backend") {
  auto message = [](std::vector<const char*> args) -> std::string {
    try {
      resolve(std::move(args));
    } catch (const UsageError& e) {
      return e.what();
    }
    return "";
  };
  RunConfig c = resolve({"--preset", "deepseek-v3-tiny"});
  CHECK(c.precision == Precision::fp32);  // the cpu backend's own
  CHECK(c.comm_timeout_s == 600);
  CHECK(resolve({"--preset", "deepseek-v3-tiny", "--precision", "fp32"}).precision ==
        Precision::fp32);
  CHECK(resolve({"--preset", "deepseek-v3-tiny", "--timeout", "30"}).comm_timeout_s == 30);
  CHECK(resolve({"--preset", "deepseek-v3-tiny", "--backend", "cuda"}).precision ==
        Precision::bf16);
  CHECK(resolve({"--preset", "deepseek-v3-tiny", "--backend", "cuda", "--precision", "bf16"})
            .precision == Precision::bf16);

  CHECK(!c.fp8_emulated());
  // fp8: emulated on the cpu backend, native (E4M3 tensor cores) on cuda.
  const RunConfig f = resolve({"--preset", "deepseek-v3-tiny", "--precision", "fp8"});
  CHECK(f.precision == Precision::fp8);
  CHECK(f.fp8_emulated());
  const RunConfig g =
      resolve({"--preset", "deepseek-v3-tiny", "--backend", "cuda", "--precision", "fp8"});
  CHECK(g.precision == Precision::fp8);
  CHECK(!g.fp8_emulated());
  std::string m = message({"--preset", "deepseek-v3-tiny", "--precision", "bf16"});
  CHECK(contains(m, "--precision bf16 is not available with --backend cpu; valid: fp32 or fp8"));
  m = message({"--preset", "deepseek-v3-tiny", "--precision", "fp16"});
  CHECK(contains(m, "--precision fp16: expected"));
  m = message({"--preset", "deepseek-v3-tiny", "--timeout", "0"});
  CHECK(contains(m, "--timeout"));
  // nccl moves device memory: with the cpu backend it is refused whether or not it is built.
  m = message({"--preset", "deepseek-v3-tiny", "--comm", "nccl"});
  CHECK((contains(m, "--comm nccl needs --backend cuda") || contains(m, "not built")));
  m = message({"--preset", "deepseek-v3-tiny", "--comm", "gloo"});
  CHECK(contains(m, "unknown communication backend"));
}

}  // namespace
}  // namespace moebench
