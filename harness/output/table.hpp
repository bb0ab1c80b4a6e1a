// The console summary of a run, for people: nccl-tests-style columns, friendly units (ms, MB,
// GB/s, TFLOP/s). Only reads the RunRecord; the JSON report is the machine-readable form.
#pragma once

#include <string>

#include "harness/output/run_record.hpp"

namespace moebench {

std::string format_run_table(const RunRecord& r);

}  // namespace moebench
