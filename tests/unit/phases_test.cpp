// The phase table is the one definition of the phases: its shape, and every place outside the
// code that names phases (the JSON schemas) checked against it, so that they cannot diverge. The
// plot and the test helpers read the table from the binary or the reports instead.
#include "harness/measure/phases.hpp"

#include <doctest/doctest.h>

#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/output/phase_table.hpp"

namespace moebench {
namespace {

std::set<std::string> all_phases() {
  std::set<std::string> s;
  for (const PhaseDef& p : kPhases) s.insert(std::string(p.name));
  return s;
}

std::set<std::string> phases_of_kind(PhaseKind k) {
  std::set<std::string> s;
  for (const PhaseDef& p : kPhases) {
    if (p.kind == k) s.insert(std::string(p.name));
  }
  return s;
}

nlohmann::json load(const std::string& name) {
  std::ifstream in(std::string(MOEBENCH_REPO_DIR) + "/reports/" + name);
  REQUIRE(in.good());
  return nlohmann::json::parse(in);
}

// Every list of names in the schema (a "required" list, the keys of "properties", an "enum")
// that names three or more phases: the places that are keyed by phase.
struct PhaseList {
  std::string where;
  std::set<std::string> phases;
};

void collect(const nlohmann::json& node, const std::string& path, std::vector<PhaseList>& out) {
  const std::set<std::string> known = all_phases();
  auto consider = [&](const std::string& where, const std::vector<std::string>& names) {
    PhaseList l{where, {}};
    for (const std::string& n : names) {
      if (known.count(n)) l.phases.insert(n);
    }
    if (l.phases.size() >= 3) out.push_back(l);
  };
  if (node.is_object()) {
    for (const char* key : {"required", "enum"}) {
      const auto it = node.find(key);
      if (it == node.end() || !it->is_array()) continue;
      std::vector<std::string> names;
      for (const auto& v : *it) {
        if (v.is_string()) names.push_back(v.get<std::string>());
      }
      consider(path + "/" + key, names);
    }
    if (const auto p = node.find("properties"); p != node.end() && p->is_object()) {
      std::vector<std::string> names;
      for (const auto& [k, v] : p->items()) names.push_back(k);
      consider(path + "/properties", names);
    }
    for (const auto& [k, v] : node.items()) collect(v, path + "/" + k, out);
  } else if (node.is_array()) {
    for (std::size_t i = 0; i < node.size(); ++i)
      collect(node[i], path + "/" + std::to_string(i), out);
  }
}

TEST_CASE("phases: the table is complete, in enum order, with the three kinds") {
  CHECK(kPhases.size() == kPhaseCount);
  CHECK(all_phases().size() == kPhaseCount);  // names are unique
  for (std::size_t i = 0; i < kPhaseCount; ++i) {
    CHECK(static_cast<std::size_t>(kPhases[i].phase) == i);
    CHECK(kPhaseNames[i] == kPhases[i].name);
    CHECK(!kPhases[i].description.empty());
  }
  CHECK(phases_of_kind(PhaseKind::communication) ==
        std::set<std::string>{"dispatch", "combine", "grad_reduce"});
  CHECK(phases_of_kind(PhaseKind::wait) == std::set<std::string>{"comm_wait", "pp_bubble"});
  CHECK(is_communication(Phase::dispatch));
  CHECK(is_compute(Phase::experts));
  CHECK(!is_compute(Phase::comm_wait));
  CHECK(phase_kind_name(Phase::comm_wait) == "wait");
}

TEST_CASE("phases: every phase-keyed list in the run and scaling schemas is the table's") {
  for (const char* file : {"run.schema.json", "scaling.schema.json"}) {
    CAPTURE(file);
    std::vector<PhaseList> lists;
    collect(load(file), "", lists);
    CHECK(lists.size() >= 2);  // the check found what it checks
    for (const PhaseList& l : lists) {
      CAPTURE(l.where);
      // Keyed by every phase, or by the communication phases alone (bus bandwidths).
      CHECK((l.phases == all_phases() || l.phases == phases_of_kind(PhaseKind::communication)));
    }
  }
  // The kind of each phase in a run report takes the table's three values.
  const nlohmann::json run = load("run.schema.json");
  std::set<std::string> kinds;
  for (const auto& k : run.at("definitions").at("phase").at("properties").at("kind").at("enum")) {
    kinds.insert(k.get<std::string>());
  }
  CHECK(kinds == std::set<std::string>{"compute", "communication", "wait"});
}

TEST_CASE("phases: the collector finds a list that diverges from the table") {
  // A schema that forgot comm_wait: the check above would fail on it.
  nlohmann::json bad = {{"properties",
                         {{"phases",
                           {{"required",
                             {"attention", "dense_mlp", "router", "permute", "dispatch", "experts",
                              "shared_expert", "combine", "grad_reduce", "optimizer"}}}}}}};
  std::vector<PhaseList> lists;
  collect(bad, "", lists);
  REQUIRE(lists.size() == 1);
  CHECK(lists[0].phases != all_phases());
}

TEST_CASE("phases: the JSON table (moebench phases --json, scaling reports) is the table") {
  const nlohmann::ordered_json t = phase_table_json();
  REQUIRE(t.size() == kPhaseCount);
  for (std::size_t i = 0; i < kPhaseCount; ++i) {
    CHECK(t[i].at("name") == std::string(kPhases[i].name));
    CHECK(t[i].at("kind") == std::string(phase_kind_name(kPhases[i].kind)));
  }
}

}  // namespace
}  // namespace moebench
