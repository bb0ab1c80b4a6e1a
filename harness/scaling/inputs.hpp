// The scaling report's inputs: run reports found from the command line's files, directories and
// globs, each read, checked against reports/run.schema.json and reduced to the figures a scaling
// report compares. Every problem is a UsageError naming the file and the field, raised before
// anything is written.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/measure/phases.hpp"
#include "harness/output/system_name.hpp"

namespace moebench {

// What `report` takes as physically possible (beyond either, a report is refused as edited or
// damaged): a rank's Megatron TFLOP/s above any accelerator's dense peak at any precision (GB300's
// FP4 is 15,000), and more ranks on one node than any machine runs (this repository's tests run
// 256 on a 2-core host).
inline constexpr double kMaxTflopsPerGpu = 20000.0;
inline constexpr int kMaxRanksPerNode = 4096;

// A (field, value) pair: the field as the report's dotted path ("config.model.hidden_size"), the
// value as compact JSON text, so any two can be compared and printed.
using FieldValue = std::pair<std::string, std::string>;

// What a scaling report takes from one run report. Times in seconds, rates per second.
struct RunPoint {
  // Provenance.
  std::string path;
  // Empty for a run that completed; else "interrupted by SIGTERM after 3 of 10 timed steps", or
  // "stopped by a failure after 3 of 10 timed steps (the error, cut short; ...)".
  std::string interrupted;
  std::string sha256;
  std::string job_id;  // SLURM_JOB_ID when the run had one
  std::vector<std::string> hosts;
  std::string start_time;
  std::string tool_version;
  std::string git_sha;
  bool synthetic = false;            // meta.synthetic: a made-up report (tests, examples)
  std::vector<FieldValue> software;  // meta strings compared between runs for warnings
  SystemName system;                 // who was measured: the GPUs and the software under them
  // What must match between runs for them to be one workload, in a fixed order.
  std::vector<FieldValue> workload_key;
  std::string model_name;
  std::int64_t seq_len = 0;
  std::int64_t micro_batch = 0;
  // Layout.
  int gpus = 0;
  int nodes = 0;
  int ranks_per_node = 0;
  int ep = 0;
  int steps = 0;  // timed steps
  double tokens_per_rank = 0;
  double global_tokens = 0;  // tokens per rank x GPUs
  // Results (each the run's median over its timed steps).
  double step_time_s = 0;
  double tflops_per_gpu = 0;
  double tokens_per_s_per_gpu = 0;
  double compute_time_s = 0;
  double communication_time_s = 0;
  double exposed_communication_s = 0;
  // Each phase's time on the rank that sets the step time, in its median step
  // (results.step_breakdown: they add up to a step); the slowest ranks' (phase_max_s) in reports
  // written before it existed.
  PerPhase<double> phase_time_s{};
  PerPhase<double> phase_max_s{};  // each phase's slowest rank, median over steps (not additive)
  PerPhase<double> busbw{};        // bytes/s, communication phases
  // --recipe: the published row the run's workload came from, and how the run differs from it.
  std::string recipe;  // empty: none
  std::optional<double> recipe_tflops_per_gpu;
  int recipe_gpus = 0;
  std::vector<std::string> recipe_differences;
  // Verification.
  bool verification_enabled = false;
  bool verification_passed = true;
  long long mismatches = 0;
  // The run's own health suspects ("rank R on HOST (metric Nx the median)"), the fault it
  // injected (--inject; empty in a measurement), and whether its fp8 was emulated (cpu).
  std::vector<std::string> suspects;
  std::string injected;
  bool fp8_emulated = false;
};

// The key fields that --allow-mixed may let vary between GPU counts.
const std::vector<std::string>& mixable_fields();  // seq_len, micro_batch, ep
// The dotted path of a mixable field's name ("micro_batch" -> "config.workload.micro_batch").
std::string mixable_field_path(const std::string& name);

struct InputFile {
  std::string path;
  bool from_directory = false;  // found by listing a directory (other kinds are skipped)
  std::string canonical;        // the absolute path without links, to tell files apart
};

// `path` made absolute without symbolic links (as far as it exists), to compare file names.
std::string canonical_path(const std::string& path);

// Files as given, directories (their *.json, sorted by name) and glob patterns (sorted
// matches), in argument order; a file named twice is kept once. `skip` (the outputs) are left
// out of directory listings. UsageError for a missing path, an empty directory, a pattern that
// matches nothing, or no input at all.
std::vector<InputFile> expand_inputs(const std::vector<std::string>& args,
                                     const std::vector<std::string>& skip = {});

// Returns the schema violations of a document ("<pointer>: <what>"), empty when valid.
using DocumentCheck = std::function<std::vector<std::string>(const nlohmann::json&)>;

// Reduces one run report (the file's bytes) to a RunPoint. UsageError "<path>: ..." for an empty
// file, text that is not JSON or is truncated, a document of another kind, a schema version this
// moebench does not read (a newer one has its own message), a schema violation (the first one,
// with its field), or a run without timed steps.
RunPoint parse_run_report(const std::string& path, const std::string& bytes,
                          const DocumentCheck& check);

// Reads and parses every input. Files from a directory whose kind is not moebench.run (an
// earlier scaling report, say) are skipped with a note in `skipped`.
std::vector<RunPoint> read_run_reports(const std::vector<InputFile>& files,
                                       const DocumentCheck& check,
                                       std::vector<std::string>* skipped);

}  // namespace moebench
