// The command line: subcommands and their flags, parsed into plain option structs. Parsing is
// pure (no MPI), so every rank reaches the same verdict on bad flags without communicating.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "harness/measure/health.hpp"
#include "workloads/config/run_config.hpp"

namespace moebench {

enum class Command {
  run,
  plan,
  predict,
  presets,
  recipes,
  phases,
  systems,
  validate,
  version,
  help,
  report,
  bench,
  linkcheck,
  accept,
  accept_merge
};

// Model and workload flags as given; resolved against the model and the world size later.
struct WorkloadFlags {
  std::string preset;
  std::string model_config;
  std::optional<std::int64_t> seq_len;
  std::int64_t micro_batch = 1;
  std::optional<std::int64_t> global_batch;  // none: micro_batch x dp
  std::optional<std::int64_t> layers;
  std::optional<std::int64_t> dense_layers;
  std::string attention = "on";
  std::string head;                 // on|off; empty: on, or off where --pipeline-layout has no E/L
  std::optional<std::int64_t> mtp;  // none: the model's, or --pipeline-layout's m count
  std::string routing = "balanced";
  std::string recompute;  // --recompute; empty: none, or the recipe's
  int ep = 1;
  int pp = 1;
  std::optional<int> vp;        // none: 1, or the --pipeline-layout's
  std::string pipeline_layout;  // empty: layers split evenly
  int ranks_per_node = 0;
  int nvlink_domain_size = 0;
  std::string grad_reduce = "allreduce";
  std::string optimizer = "adamw";
  std::string optimizer_state_dtype = "fp32";  // --optimizer-state-dtype; a recipe's by default
  std::string fp8_weight_copies = "auto";      // --fp8-weight-copies
  std::string fp8_saved_inputs = "on";         // --fp8-saved-inputs
  AdamWParams adamw;
  std::uint64_t seed = 1234;
  ComputeBackend backend = ComputeBackend::cpu;
  CommBackend comm = CommBackend::mpi;
  std::optional<Precision> precision;   // none: the backend's own (cpu fp32, cuda bf16)
  std::optional<Fp8Recipe> fp8_recipe;  // none: tensor
  std::string grouped_gemm = "loop";    // --grouped-gemm
  std::string attention_impl = "auto";  // --attention-impl
  int blas_threads = 1;
  std::string comm_barrier = "on";
  std::string overlap = "on";
  double grad_bucket_mb = 80;  // MiB; RunConfig::grad_bucket_bytes says why
  std::string recipe;          // --recipe NAME: a published row's workload (workloads/config)
  bool keep_batch = false;     // --keep-batch: the recipe's batch on another model too
  // The flags given on the command line that a recipe also sets (they override it).
  std::vector<std::string> given;
  bool backend_given = false;  // --backend on the command line (predict: a GPU system implies cuda)
  // Trainer features of public rows that moebench's step does not run and `predict` does not
  // price, under Megatron's names so that a row's settings can be given as it ran: refused in one
  // line naming the feature (option_checks::check_trainer_features), never priced as another step.
  int tp = 1;                                       // --tp (--tensor-model-parallel-size)
  bool sequence_parallel = false;                   // --sequence-parallel
  std::string recompute_granularity = "selective";  // --recompute-granularity selective|full
  std::string pipeline_schedule = "1f1b";           // --pipeline-schedule 1f1b|dualpipe
  bool fsdp = false;                                // --use-megatron-fsdp, --use-torch-fsdp2
};

// The flags a recipe sets, in the order the report lists overrides.
const std::vector<std::string>& recipe_flags();

// `moebench report`: run reports in, a scaling report out (a plain file tool: no MPI).
struct ReportOptions {
  std::vector<std::string> inputs;  // files, directories, globs
  std::string out;                  // scaling JSON
  std::string markdown;
  std::string plot;  // PNG, drawn by reports/plot_scaling.py
  std::optional<int> baseline;
  std::vector<std::string> allow_mixed;
  std::optional<double> claim_tflops;
  std::optional<double> claim_efficiency;
  std::optional<double> min_tflops;
  std::optional<double> min_efficiency;
  bool claim_from_recipe = false;  // judge the runs' recipe's claim like for like
  std::string claim_recipe;        // --claim-recipe NAME: the recipe the claims are about
  std::optional<int> claim_gpus;   // --claim-gpus N: the efficiency claim's larger size
  bool allow_failed = false;       // merge interrupted runs too
  bool allow_suspects = false;     // runs with health suspects do not fail the verdict
  bool allow_injected = false;     // runs with an injected fault do not fail the verdict
  bool quiet = false;
  std::string system;     // --system: the runs' predicted times beside the measured ones
  std::string calibrate;  // --calibrate RUN.json: the prediction calibrated from it
};

// `moebench accept`: the acceptance ladder (harness/cli/accept_command.cpp); the step's workload
// and the run's flags come from CliOptions' own.
struct AcceptOptions {
  std::string out;  // --out DIR: accept.json, accept.md, junit.xml, drain.txt
  // A GPU figure passes at >= floor x the SKU's expected figure (not judged on the cpu system,
  // whose figures are nominal).
  double floor = 0.8;
  // A rank slower than the median rank by more than this fraction fails (default 0.1 on a GPU,
  // 1.0 on the cpu backend, whose ranks share cores).
  std::optional<double> min_slowdown;
  int sdc_repeats = 5;                 // the same GEMM this many times on every rank
  double duration_s = 0;               // --duration: the burn-in's length (0: none)
  std::optional<std::int64_t> gemm_n;  // its size (default 8192; cpu 1024)
  std::vector<std::string> nodes;      // accept-merge --nodes: each must have a report
  std::string baseline;  // --baseline FILE: a known-good node's accept.json sets the figures
  std::string floors;    // --floors FILE: the site's own floors (reports/floors.schema.json)
  std::string dcgm;      // --dcgm FILE: dcgmi diag -j results (%h: the node's name)
};

// `moebench bench`: the performance probe on one device (one process, no MPI). Unset values get
// the backend's defaults (harness/cli/bench_command.cpp).
struct BenchOptions {
  ComputeBackend backend = ComputeBackend::cpu;
  std::string preset;  // default: deepseek-v3 (cpu backend: deepseek-v3-tiny)
  std::string model_config;
  std::optional<int> ep;  // the emulated expert-parallel size (default experts / top-k)
  std::optional<std::int64_t> seq_len;
  std::optional<std::int64_t> gemm_n;  // default 8192 (cpu backend: 1024)
  std::string layers = "1,4";
  std::optional<Precision> precision;   // none: the backend's own (cpu fp32, cuda bf16)
  std::optional<Fp8Recipe> fp8_recipe;  // none: tensor
  std::string optimizer = "adamw";
  std::string optimizer_state_dtype = "fp32";  // --optimizer-state-dtype; a recipe's by default
  std::string fp8_weight_copies = "auto";      // --fp8-weight-copies
  std::optional<double> peak_tflops;
  int warmup = 2;
  int iterations = 10;
  int blas_threads = 1;
  std::uint64_t seed = 1234;
  std::string out;
  bool quiet = false;
};

// `moebench linkcheck`: pairwise bandwidth and latency between the ranks (harness/cli/linkcheck).
struct LinkcheckOptions {
  ComputeBackend backend = ComputeBackend::cpu;
  CommBackend comm = CommBackend::mpi;
  std::string level = "rank";               // rank: every pair; node: node pairs, then in-node
  std::optional<std::int64_t> large_bytes;  // default 64 MiB on a GPU, 4 MiB on the cpu backend
  std::int64_t small_bytes = 8;
  int iterations = 20;         // timed transfers per pair, direction and size
  int ranks_per_node = 0;      // 0: detect
  int nvlink_domain_size = 0;  // 0: detect (the node without NVML fabric info)
  double mad_k = 6;
  std::optional<double> min_slowdown;  // none: the backend's (health.hpp)
  bool gate = false;                   // --health-gate: exit 5 on outliers
  double timeout_s = 600;
  std::string out;
  std::string plot;
  bool quiet = false;
};

struct CliOptions {
  Command command = Command::help;
  WorkloadFlags workload;
  int warmup = 3;
  int steps = 10;
  bool verify = false;
  // run: the longest wait for a collective or the communicator setup (--timeout)
  double timeout_s = 600;
  std::string out;                       // run: report path; plan: JSON path
  std::string step_log;                  // run: --step-log (default OUT.steps.jsonl with --out)
  bool json = false;                     // plan, phases: print JSON
  std::optional<int> world;              // plan: the world size to plan for (1, or the recipe's)
  std::optional<double> gpu_memory_gib;  // plan: the GPU memory the largest rank must fit in
  bool quiet = false;                    // run: no table
  std::optional<FaultSpec> inject;       // run: --inject (a testing aid)
  double health_mad = 6;                 // run: --health-mad
  std::optional<double> health_min_slowdown;  // run: none: the backend's (health.hpp)
  bool health_gate = false;                   // run: exit 5 when there are suspects
  std::vector<std::string> files;             // validate
  std::vector<std::string> system_files;      // systems --system FILE
  std::string system;                         // predict --system NAME|FILE
  std::vector<int> gpus;                      // predict --gpus (default: recipe's, x4, x32)
  bool explain = false;                       // predict --explain
  std::string calibrate;                      // predict --calibrate RUN.json
  std::string ep_comm_overlap;                // predict --ep-comm-overlap on|off (recipe's)
  std::string cuda_graphs;    // predict --cuda-graphs none|partial|full_iteration (recipe's)
  std::string fp8_attention;  // predict --fp8-attention on|off (recipe's)
  std::optional<std::int64_t> global_batch_per_gpu;  // predict: weak scaling without a recipe
  std::vector<std::string> measured;  // predict --measured RUN.json...: hardware figures
  std::string plot;                   // predict --plot PNG
  std::string help_text;              // for Command::help
  std::vector<std::string> argv;
  ReportOptions report;
  BenchOptions bench;
  LinkcheckOptions linkcheck;
  AcceptOptions accept;
};

// Parses argv. --help prints nothing but returns Command::help with the text. Bad flags throw
// UsageError with one line naming the flag and what is valid.
CliOptions parse_command_line(int argc, const char* const* argv);

// The model, the workload and the layout for `world` ranks, with defaults filled in (seq 4096,
// or the preset's own; all layers; dense layers in the model's proportion), validated.
RunConfig resolve_run_config(const CliOptions& o, int world);

}  // namespace moebench
