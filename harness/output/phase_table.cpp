#include "harness/output/phase_table.hpp"

#include <string>

#include "harness/measure/phases.hpp"

namespace moebench {

nlohmann::ordered_json phase_table_json() {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const PhaseDef& p : kPhases) {
    out.push_back({{"name", std::string(p.name)},
                   {"kind", std::string(phase_kind_name(p.kind))},
                   {"description", std::string(p.description)}});
  }
  return out;
}

}  // namespace moebench
