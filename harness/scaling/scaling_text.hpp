// What a person reads: the scaling report as a terminal table and as Markdown. One row per GPU
// count (GPUs, nodes, step time, TFLOP/s and tokens/s per GPU, efficiency, exposed
// communication, bus bandwidths, verdicts), then the verdicts and the warnings. Reads only the
// ScalingResult; units change here only (ms, GB/s, %).
#pragma once

#include <string>
#include <vector>

#include "harness/scaling/scaling.hpp"
#include "harness/scaling/scaling_report.hpp"

namespace moebench {

// The terminal summary: the table, phase growth, verdicts and warnings, lines starting with '#'
// except the table's rows.
std::string scaling_terminal(const ScalingResult& result, std::size_t input_count);

// The Markdown report: the same table, the per-phase step time per size, phase growth, the
// verdicts, the inputs with their SHA-256 and the warnings.
std::string scaling_markdown(const ScalingResult& result, const std::vector<RunPoint>& runs,
                             const ScalingMeta& meta);

// The size's verdicts in one cell: "PASS", "FAIL: min_tflops", or "-" when it has none.
std::string verdict_cell(const ScalingResult& result, int gpus);

}  // namespace moebench
