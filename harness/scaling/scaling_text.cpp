#include "harness/scaling/scaling_text.hpp"

#include <cctype>
#include <cstdio>
#include <sstream>

#include "harness/core/human.hpp"

namespace moebench {

namespace {

std::string printf_string(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string ms(double s) {
  return printf_string("%.3f", s * 1e3);
}
std::string pct(double share) {
  return printf_string("%.1f%%", share * 100.0);
}
std::string sig(double v) {
  return printf_string("%.4g", v);
}
std::string gbps(double bytes_per_s) {
  if (!(bytes_per_s > 0)) return "-";
  const double g = bytes_per_s / 1e9;
  return printf_string(g < 100 ? "%.3g" : "%.0f", g);
}
std::string spread_cell(const SizeResult& s) {
  return s.runs.size() < 2 ? "-" : printf_string("%.1f%%", s.step_time_s.relative() * 100.0);
}

std::string hosts_cell(const std::vector<std::string>& hosts) {
  if (hosts.size() <= 2) {
    std::string out;
    for (const std::string& h : hosts) out += (out.empty() ? "" : ", ") + h;
    return out;
  }
  return hosts.front() + " ... " + hosts.back() + " (" + std::to_string(hosts.size()) + ")";
}

struct Column {
  const char* header;
  std::string (*cell)(const ScalingResult&, const SizeResult&);
};

const Column kColumns[] = {
    {"GPUs", [](const ScalingResult&, const SizeResult& s) { return std::to_string(s.gpus); }},
    {"nodes", [](const ScalingResult&, const SizeResult& s) { return std::to_string(s.nodes); }},
    {"runs",
     [](const ScalingResult&, const SizeResult& s) { return std::to_string(s.runs.size()); }},
    {"step (ms)",
     [](const ScalingResult&, const SizeResult& s) { return ms(s.step_time_s.median); }},
    {"spread", [](const ScalingResult&, const SizeResult& s) { return spread_cell(s); }},
    {"TFLOP/s/GPU",
     [](const ScalingResult&, const SizeResult& s) { return sig(s.tflops_per_gpu.median); }},
    {"tokens/s/GPU",
     [](const ScalingResult&, const SizeResult& s) {
       return printf_string("%.0f", s.tokens_per_s_per_gpu.median);
     }},
    {"efficiency",
     [](const ScalingResult&, const SizeResult& s) { return printf_string("%.3f", s.efficiency); }},
    {"exposed comm",
     [](const ScalingResult&, const SizeResult& s) { return pct(s.exposed_share); }},
    {"a2a busbw (GB/s)",
     [](const ScalingResult&, const SizeResult& s) { return gbps(s.alltoall_busbw); }},
    {"grad busbw (GB/s)",
     [](const ScalingResult&, const SizeResult& s) {
       return gbps(s.busbw[static_cast<std::size_t>(Phase::grad_reduce)]);
     }},
    {"verification",
     [](const ScalingResult&, const SizeResult& s) {
       return std::string(verification_name(s.verification));
     }},
    {"verdicts",
     [](const ScalingResult& r, const SizeResult& s) { return verdict_cell(r, s.gpus); }},
};

std::vector<std::vector<std::string>> table_rows(const ScalingResult& r) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> header;
  for (const Column& c : kColumns) header.push_back(c.header);
  rows.push_back(header);
  for (const SizeResult& s : r.sizes) {
    std::vector<std::string> row;
    for (const Column& c : kColumns) row.push_back(c.cell(r, s));
    rows.push_back(row);
  }
  return rows;
}

std::string growth_line(const PhaseGrowth& g) {
  std::ostringstream os;
  os << g.from_gpus << " -> " << g.to_gpus << " GPUs: step " << ms(g.from_step_s) << " -> "
     << ms(g.to_step_s) << " ms; ";
  if (g.grew.empty()) {
    os << "no phase grew by more than 1% of the step";
    return os.str();
  }
  os << "grew:";
  for (std::size_t i = 0; i < g.grew.size(); ++i) {
    const PhaseChange& c = g.phases[static_cast<std::size_t>(g.grew[i])];
    os << (i ? "," : "") << " " << phase_name(c.phase) << " +" << ms(c.delta_s()) << " ms";
    // A ratio to a phase that took almost nothing (no all-to-all on one GPU) says nothing.
    const auto ratio = c.ratio();
    if (ratio && c.from_s > 0.01 * g.from_step_s)
      os << " (x" << printf_string("%.2f", *ratio) << ")";
  }
  return os.str();
}

std::string verdict_line(const Verdict& v) {
  return std::string(v.passed ? "PASS" : "FAIL") + "  " + v.name + ": " + v.reason;
}

// A need's figure for people: TFLOP/s or GB/s.
std::string need_value(const std::optional<double>& x, const std::string& unit) {
  if (!x) return "not alone";
  return printf_string("%.4g", *x / rate_scale(unit).per);
}

// What a like-for-like claim needs of each part: rows of words and numbers.
std::vector<std::vector<std::string>> needs_rows(const ClaimBasis& b) {
  std::vector<std::vector<std::string>> rows = {
      {"part", "measured", "needed", "to pass", "datasheet", "unit", "from"}};
  for (const Need& n : b.needs) {
    rows.push_back({n.name, need_value(n.measured, n.unit), need_value(n.needed, n.unit),
                    need_value(n.needed_to_pass, n.unit), need_value(n.datasheet, n.unit),
                    rate_scale(n.unit).name, n.from});
  }
  return rows;
}

std::string comparison_line(const RecipeComparison& c) {
  return "moebench's own step at " + gpus_text(c.gpus) + ": " + printf_string("%.4g", c.measured) +
         " TFLOP/s per GPU, " + printf_string("%.3g", c.measured / c.published) + "x recipe " +
         c.recipe + "'s published " + printf_string("%.4g", c.published) +
         " (a figure, not a verdict: moebench's step is not the stack that published it" +
         (c.differences.empty()
              ? ""
              : "; it differs from the row in " + std::to_string(c.differences.size()) + " ways") +
         ")";
}

std::string md_escape(std::string s) {
  std::string out;
  for (char ch : s) {
    if (ch == '|') out += "\\";
    out += ch;
  }
  return out;
}

// Columns of numbers are right-aligned, columns of words left-aligned.
bool numeric_column(const std::vector<std::vector<std::string>>& rows, std::size_t k) {
  for (std::size_t i = 1; i < rows.size(); ++i) {
    const std::string& c = rows[i][k];
    if (c.empty() ||
        !(std::isdigit(static_cast<unsigned char>(c[0])) || c[0] == '-' || c[0] == '+')) {
      return false;
    }
  }
  return true;
}

void markdown_table(std::ostream& os, const std::vector<std::vector<std::string>>& rows) {
  for (std::size_t i = 0; i < rows.size(); ++i) {
    os << "|";
    for (const std::string& cell : rows[i]) os << " " << md_escape(cell) << " |";
    os << "\n";
    if (i == 0) {
      os << "|";
      for (std::size_t k = 0; k < rows[i].size(); ++k) {
        os << (k > 0 && numeric_column(rows, k) ? "---:|" : "---|");
      }
      os << "\n";
    }
  }
}

}  // namespace

std::string verdict_cell(const ScalingResult& result, int gpus) {
  std::string failed;
  bool any = false;
  for (const Verdict& v : result.verdicts) {
    if (v.gpus != gpus) continue;
    any = true;
    if (!v.passed) failed += (failed.empty() ? "" : ", ") + v.name;
  }
  if (!any) return "-";
  return failed.empty() ? "PASS" : "FAIL: " + failed;
}

std::string scaling_terminal(const ScalingResult& r, std::size_t input_count) {
  std::ostringstream os;
  os << "# moebench report: " << r.model_name << ", " << r.sizes.size()
     << (r.sizes.size() == 1 ? " size from " : " sizes from ") << input_count
     << (input_count == 1 ? " run" : " runs") << "\n";
  os << "# system: " << r.system_description << "\n";
  os << "# " << r.mode_explanation << "\n";
  os << "# " << r.efficiency_definition << "\n#\n";
  const auto rows = table_rows(r);
  std::vector<std::size_t> width(rows.front().size(), 0);
  for (const auto& row : rows) {
    for (std::size_t k = 0; k < row.size(); ++k) width[k] = std::max(width[k], row[k].size());
  }
  for (std::size_t i = 0; i < rows.size(); ++i) {
    os << (i == 0 ? "#" : " ");
    for (std::size_t k = 0; k < rows[i].size(); ++k) {
      const bool last = k + 1 == rows[i].size();
      const std::string& cell = rows[i][k];
      // numbers right-aligned; the text columns at the end left-aligned
      if (k + 2 >= rows[i].size()) {
        os << "  " << cell << (last ? "" : std::string(width[k] - cell.size(), ' '));
      } else {
        os << "  " << std::string(width[k] - cell.size(), ' ') << cell;
      }
    }
    os << "\n";
  }
  os << "#\n";
  for (const PhaseGrowth& g : r.growth) os << "# " << growth_line(g) << "\n";
  if (!r.verdicts.empty()) {
    if (!r.growth.empty()) os << "#\n";
    for (const Verdict& v : r.verdicts) os << "# " << verdict_line(v) << "\n";
    for (const Verdict& v : r.verdicts) {
      if (!v.like_for_like || v.like_for_like->needs.empty()) continue;
      os << "# " << v.name << " needs, each part alone with the others as measured (first: the "
         << "least raise that reaches the claim, else that passes it):\n";
      const auto rows = needs_rows(*v.like_for_like);
      std::vector<std::size_t> width(rows.front().size(), 0);
      for (const auto& row : rows) {
        for (std::size_t k = 0; k < row.size(); ++k) width[k] = std::max(width[k], row[k].size());
      }
      for (const auto& row : rows) {
        os << "#  ";
        for (std::size_t k = 0; k < row.size(); ++k) {
          const std::string pad(width[k] - row[k].size(), ' ');
          const bool last = k + 1 == row.size();
          os << "  " << (k == 0 || k + 2 >= row.size() ? row[k] + (last ? "" : pad) : pad + row[k]);
        }
        os << "\n";
      }
    }
    os << "# verdict: " << (r.passed() ? "PASS" : "FAIL") << "\n";
  }
  if (r.recipe_comparison) os << "# " << comparison_line(*r.recipe_comparison) << "\n";
  for (const std::string& w : r.warnings) os << "# warning: " << w << "\n";
  return os.str();
}

std::string scaling_markdown(const ScalingResult& r, const std::vector<RunPoint>& runs,
                             const ScalingMeta& meta) {
  std::ostringstream os;
  os << "# Scaling report: " << r.model_name << "\n\n";
  os << "- system: " << md_escape(r.system_description) << "\n";
  os << "- " << r.mode_explanation << "\n";
  os << "- " << r.efficiency_definition << "\n";
  os << "- baseline: " << r.baseline_gpus << (r.baseline_gpus == 1 ? " GPU" : " GPUs") << "; "
     << r.sizes.size() << (r.sizes.size() == 1 ? " size from " : " sizes from ") << runs.size()
     << " runs (repeats of a size: medians)\n";
  if (!r.verdicts.empty()) os << "- **verdict: " << (r.passed() ? "PASS" : "FAIL") << "**\n";
  os << "\n";
  markdown_table(os, table_rows(r));

  os << "\n## Step time by phase (ms: the rank that sets the step time, in its median step; "
        "other: the step less its phases)\n\n";
  std::vector<std::vector<std::string>> phase_rows;
  std::vector<std::string> header = {"GPUs"};
  for (std::string_view name : kPhaseNames) header.emplace_back(name);
  header.push_back("other");
  header.push_back("step");
  phase_rows.push_back(header);
  for (const SizeResult& s : r.sizes) {
    std::vector<std::string> row = {std::to_string(s.gpus)};
    double other = s.step_time_s.median;
    for (double t : s.phase_time_s) {
      row.push_back(ms(t));
      other -= t;
    }
    row.push_back(ms(other));
    row.push_back(ms(s.step_time_s.median));
    phase_rows.push_back(row);
  }
  markdown_table(os, phase_rows);

  os << "\n## Phase growth between sizes\n\n";
  for (const PhaseGrowth& g : r.growth) os << "- " << growth_line(g) << "\n";

  os << "\n## Verdicts\n\n";
  if (r.verdicts.empty()) {
    os << "No claims or thresholds were given (--claim-tflops, --claim-efficiency, "
          "--min-tflops, --min-efficiency) and no run was verified.\n";
  } else {
    std::vector<std::vector<std::string>> rows = {
        {"check", "GPUs", "measured", "threshold", "margin", "result"}};
    for (const Verdict& v : r.verdicts) {
      rows.push_back(
          {v.name, std::to_string(v.gpus), sig(v.measured), v.comparison + " " + sig(v.threshold),
           sig(v.margin) + (v.threshold > 0
                                ? " (" + printf_string("%+.2f%%", 100 * v.relative_margin) + ")"
                                : ""),
           v.passed ? "PASS" : "**FAIL**"});
    }
    markdown_table(os, rows);
    os << "\n";
    for (const Verdict& v : r.verdicts) os << "- " << verdict_line(v) << "\n";
    for (const Verdict& v : r.verdicts) {
      if (!v.like_for_like || v.like_for_like->needs.empty()) continue;
      os << "\n### What " << v.name << " needs\n\n"
         << "Each part alone, every other as measured: the value at which the recipe's priced step "
            "reaches the claim (`needed`) and at which the claim falls within the band (`to "
            "pass`); \"not alone\" where no value of that part suffices.\n\n";
      markdown_table(os, needs_rows(*v.like_for_like));
    }
  }
  if (r.recipe_comparison) {
    os << "\n## Against the published row\n\n- " << comparison_line(*r.recipe_comparison) << "\n";
    for (const std::string& d : r.recipe_comparison->differences) os << "  - " << d << "\n";
  }

  os << "\n## Warnings\n\n";
  if (r.warnings.empty()) os << "None.\n";
  for (const std::string& w : r.warnings) os << "- " << w << "\n";

  os << "\n## Workload\n\n";
  std::size_t model_fields = 0;
  for (const auto& [field, value] : r.workload) {
    if (field.starts_with("config.model.")) {
      ++model_fields;
      continue;
    }
    os << "- `" << field << "`: "
       << (std::find(r.mixed_fields.begin(), r.mixed_fields.end(), field) != r.mixed_fields.end()
               ? "differs between sizes (--allow-mixed)"
               : value)
       << "\n";
  }
  os << "- `config.model`: " << model_fields << " fields, the same in every run\n";

  os << "\n## Inputs\n\n";
  std::vector<std::vector<std::string>> rows = {
      {"file", "GPUs", "nodes", "job", "hosts", "start", "verification", "SHA-256"}};
  for (const RunPoint& p : runs) {
    rows.push_back({p.path + (p.synthetic ? " (synthetic)" : ""), std::to_string(p.gpus),
                    std::to_string(p.nodes), p.job_id.empty() ? "-" : p.job_id, hosts_cell(p.hosts),
                    p.start_time,
                    !p.verification_enabled ? "not run"
                    : p.verification_passed ? "passed"
                                            : "failed",
                    "`" + p.sha256 + "`"});
  }
  markdown_table(os, rows);
  os << "\nmoebench " << meta.tool_version << " (" << meta.git_sha
     << (meta.git_dirty ? ", dirty" : "") << "), " << meta.created << "\n";
  return os.str();
}

}  // namespace moebench
