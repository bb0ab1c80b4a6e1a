// The run report: one self-describing JSON document per run (reports/run.schema.json), built
// only from the RunRecord. Keys are stable; bump kRunSchemaVersion when one changes meaning.
#pragma once

#include <nlohmann/json.hpp>

#include "harness/output/run_record.hpp"

namespace moebench {

constexpr int kRunSchemaVersion = 1;
constexpr const char* kRunReportKind = "moebench.run";
constexpr const char* kRunSchemaFile = "run.schema.json";

nlohmann::ordered_json make_run_report(const RunRecord& r);
// meta.blas_core of the run and bench reports.
nlohmann::ordered_json blas_core_json(const BlasCore& b);

}  // namespace moebench
