// The phase table (harness/measure/phases.hpp) as JSON: `moebench phases --json` prints it and
// the scaling report carries it, so the plot and the test helpers read the phases from there.
#pragma once

#include <nlohmann/json.hpp>

namespace moebench {

// [{"name": "attention", "kind": "compute", "description": "..."}, ...] in table order.
nlohmann::ordered_json phase_table_json();

}  // namespace moebench
