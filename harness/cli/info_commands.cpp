// The commands that read or compute but run no step: plan, presets, validate.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "harness/cli/commands.hpp"
#include "harness/core/error.hpp"
#include "harness/core/human.hpp"
#include "harness/output/atomic_file.hpp"
#include "harness/output/phase_table.hpp"
#include "harness/output/run_report.hpp"
#include "harness/output/schema.hpp"
#include "workloads/accounting/accounting.hpp"

namespace moebench {

namespace {

std::string human(double v, const char* unit) {
  const char* prefixes[] = {"", "K", "M", "G", "T", "P", "E"};
  int i = 0;
  while (std::abs(v) >= 1000.0 && i < 6) {
    v /= 1000.0;
    ++i;
  }
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.4g %s%s", v, prefixes[i], unit);
  return buf;
}

std::string gib(double bytes) {
  return format_gib(bytes, 3);
}

nlohmann::ordered_json plan_json(const RunConfig& c) {
  nlohmann::ordered_json j;
  j["kind"] = "moebench.plan";
  j["schema_version"] = 1;
  j["config"]["model"] = to_json(c.model);
  j["config"]["workload"] = to_json(c.workload, c.layout);
  j["parallel"] = to_json(c.layout);
  const double tokens = static_cast<double>(tokens_per_step(c));
  j["accounting"]["full_model"] = to_json(account_full_model(c.model, c.workload.seq_len, tokens));
  j["accounting"]["instantiated"] = to_json(account_instantiated(c));
  const CollectiveBytes b = collective_bytes(c, 2);
  j["accounting"]["collective_bytes_bf16"] = to_json(b);
  j["memory_estimate_per_rank"]["bf16"] = to_json(estimate_memory(c, 2));
  j["memory_estimate_per_rank"]["fp32"] = to_json(estimate_memory(c, 4));
  return j;
}

void print_plan(const RunConfig& c, std::ostream& os) {
  const double tokens = static_cast<double>(tokens_per_step(c));
  const StackAccounting full = account_full_model(c.model, c.workload.seq_len, tokens);
  const StackAccounting inst = account_instantiated(c);
  os << "# model " << c.model.name << ", seq " << c.workload.seq_len << ", micro-batch "
     << c.workload.micro_batch << ", world " << c.layout.world << ", ep " << c.layout.ep << "\n";
  for (const StackAccounting* a : {&full, &inst}) {
    os << "# " << a->scope << ": " << human(static_cast<double>(a->total_params), "") << " params, "
       << human(static_cast<double>(a->active_params), "") << " active, "
       << human(a->flops_per_token, "FLOP") << "/token (Megatron), "
       << human(a->flops_per_token_torchtitan, "FLOP") << "/token (TorchTitan), "
       << human(a->flops_per_step, "FLOP") << "/step\n";
  }
  os << "# instantiated: " << c.workload.layers << " layers (" << c.workload.dense_layers
     << " dense), attention " << (c.workload.attention ? "on" : "off") << "\n";
  for (int bytes : {2, 4}) {
    const MemoryEstimate m = estimate_memory(c, bytes);
    os << "# memory per rank (" << (bytes == 2 ? "bf16" : "fp32") << "): " << gib(m.total())
       << " = weights " << gib(m.weights) << " + grads " << gib(m.gradients) << " + optimizer "
       << gib(m.optimizer) << " + activations " << gib(m.activations) << " + comm "
       << gib(m.communication) << " + workspace " << gib(m.workspace) << "\n";
  }
}

}  // namespace

int plan_command(const CliOptions& o) {
  const RunConfig c = resolve_run_config(o, o.world);
  if (!o.out.empty()) ensure_writable_destination(o.out);
  const nlohmann::ordered_json j = plan_json(c);
  if (o.json) {
    std::cout << j.dump(2) << "\n";
  } else {
    print_plan(c, std::cout);
  }
  if (!o.out.empty()) write_file_atomically(o.out, j.dump(2) + "\n");
  return 0;
}

int presets_command() {
  std::printf("%-18s %12s %12s %16s  %s\n", "preset", "params", "active", "FLOP/token",
              "description");
  for (const PresetInfo& p : preset_list()) {
    const ModelConfig m = preset(p.name);
    const StackAccounting a = account_full_model(m, p.default_seq_len, 1);
    std::printf("%-18s %12s %12s %16s  %s\n", p.name.c_str(),
                human(static_cast<double>(a.total_params), "").c_str(),
                human(static_cast<double>(a.active_params), "").c_str(),
                human(a.flops_per_token, "").c_str(), p.description.c_str());
  }
  std::printf("# FLOP/token: Megatron-Core convention at the preset's default sequence length\n");
  return 0;
}

int phases_command(const CliOptions& o) {
  if (o.json) {
    std::cout << nlohmann::ordered_json{{"phases", phase_table_json()}}.dump(2) << "\n";
    return 0;
  }
  std::printf("%-14s %-14s  %s\n", "phase", "kind", "what it holds");
  for (const PhaseDef& p : kPhases) {
    std::printf("%-14s %-14s  %s\n", std::string(p.name).c_str(),
                std::string(phase_kind_name(p.kind)).c_str(), std::string(p.description).c_str());
  }
  return 0;
}

int validate_command(const CliOptions& o) {
  const nlohmann::json schema = load_schema(kRunSchemaFile);
  int bad = 0;
  for (const std::string& path : o.files) {
    std::ifstream in(path);
    if (!in) {
      std::cerr << path << ": cannot be read\n";
      ++bad;
      continue;
    }
    nlohmann::json doc;
    try {
      doc = nlohmann::json::parse(in);
    } catch (const nlohmann::json::parse_error& e) {
      std::cerr << path << ": not JSON (" << e.what() << ")\n";
      ++bad;
      continue;
    }
    const std::vector<std::string> errors = schema_errors(doc, schema);
    for (const std::string& e : errors) std::cerr << path << ": " << e << "\n";
    if (!errors.empty()) {
      ++bad;
    } else {
      std::cout << path << ": valid " << kRunReportKind << " (schema version " << kRunSchemaVersion
                << ")\n";
    }
  }
  return bad == 0 ? 0 : static_cast<int>(ExitCode::usage);
}

}  // namespace moebench
