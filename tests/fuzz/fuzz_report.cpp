// Fuzz target: the run-report reader and the merger behind `moebench report`. The input is one to
// four run reports separated by lines of "@@"; each is read as a file would be (JSON, the run
// schema, the cross-checks), then the ones read are merged into a scaling report (with a claim
// and thresholds, so every verdict is computed), written as JSON, terminal text and Markdown, and
// the JSON must match its own schema: a report that moebench accepts never yields a scaling
// report that fails it.
#include <cstdint>
#include <string>
#include <vector>

#include "harness/core/error.hpp"
#include "harness/output/run_report.hpp"
#include "harness/output/schema.hpp"
#include "harness/scaling/inputs.hpp"
#include "harness/scaling/scaling.hpp"
#include "harness/scaling/scaling_report.hpp"
#include "harness/scaling/scaling_text.hpp"
#include "tests/fuzz/fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace moebench;
  fuzz::setup_once();
  static const SchemaValidator run_schema(load_schema(kRunSchemaFile));
  static const SchemaValidator scaling_schema(load_schema(kScalingSchemaFile));
  const std::string text = fuzz::text_of(data, size);
  std::vector<std::string> parts;
  std::string::size_type start = 0;
  for (;;) {
    const auto sep = text.find("\n@@\n", start);
    parts.push_back(text.substr(start, sep == std::string::npos ? std::string::npos : sep - start));
    if (sep == std::string::npos || parts.size() == 4) break;
    start = sep + 4;
  }
  std::vector<RunPoint> runs;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    fuzz::usage_errors_only([&] {
      runs.push_back(
          parse_run_report("run" + std::to_string(i) + ".json", parts[i],
                           [&](const nlohmann::json& d) { return run_schema.errors(d); }));
    });
  }
  if (runs.size() < 2) return 0;
  fuzz::usage_errors_only([&] {
    ScalingOptions options;
    options.claim_tflops = 1000;
    options.claim_efficiency = 0.9;
    options.min_tflops = 1;
    options.min_efficiency = 0.5;
    options.allow_mixed = mixable_fields();
    const ScalingResult result = compute_scaling(runs, options);
    const ScalingMeta meta{"0", "fuzz", false, {"moebench", "report"}, "2026-01-01T00:00:00Z"};
    const nlohmann::ordered_json report = make_scaling_report(result, runs, options, meta);
    const std::vector<std::string> errors = scaling_schema.errors(nlohmann::json(report));
    if (!errors.empty()) {
      throw RuntimeError("the scaling report fails its schema: " + errors.front());
    }
    (void)report.dump(2);
    (void)scaling_terminal(result, runs.size());
    (void)scaling_markdown(result, runs, meta);
  });
  return 0;
}
