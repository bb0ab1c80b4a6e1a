#include "harness/cli/accept_figures.hpp"

#include <algorithm>
#include <iterator>
#include <set>

#include <nlohmann/json.hpp>

#include "harness/core/error.hpp"
#include "harness/core/regular_file.hpp"
#include "harness/measure/stats.hpp"
#include "harness/output/schema.hpp"

namespace moebench {

namespace {

nlohmann::json parse_json(const std::string& path, const std::string& flag,
                          const std::string& what) {
  const std::string text = read_regular_file(path, "give " + flag + " " + what, kMaxInputBytes);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw UsageError(flag + " " + path + ": not JSON (" + e.what() + "); give " + what);
  }
}

void check_schema(const nlohmann::json& doc, const std::string& path, const std::string& flag,
                  const std::string& schema_file, const std::string& what) {
  const std::vector<std::string> errors = schema_errors(doc, load_schema(schema_file));
  if (!errors.empty()) {
    throw UsageError(flag + " " + path + ": " + errors.front() + " (" + schema_file + "); give " +
                     what);
  }
}

bool is_rate_figure(const std::string& name) {
  return std::find(std::begin(kRateFigures), std::end(kRateFigures), name) !=
         std::end(kRateFigures);
}

}  // namespace

SiteFigures read_floors(const std::string& path) {
  const std::string what =
      "a JSON object of floors, e.g. {\"gemm_rate\": 6.0e14, \"memory_bandwidth\": 3.6e12}";
  const nlohmann::json doc = parse_json(path, "--floors", what);
  if (doc.is_object()) {
    for (const auto& [key, value] : doc.items()) {
      if (!is_rate_figure(key) && key != "source") {
        throw UsageError("--floors " + path + ": unknown key '" + key +
                         "'; give gemm_rate, grouped_gemm_rate, attention_rate (FLOP/s), "
                         "memory_bandwidth (bytes/s) and source");
      }
    }
  }
  check_schema(doc, path, "--floors", "floors.schema.json", what);
  SiteFigures f;
  f.floors = true;
  f.source = "--floors " + path +
             (doc.contains("source") ? ": " + doc["source"].get<std::string>() : std::string());
  for (const char* name : kRateFigures) {
    if (doc.contains(name)) f.value[name][""] = doc[name].get<double>();
  }
  return f;
}

SiteFigures read_baseline(const std::string& path) {
  const std::string what = "a known-good node's accept.json";
  const nlohmann::json doc = parse_json(path, "--baseline", what);
  check_schema(doc, path, "--baseline", "accept.schema.json", what);
  std::map<int, std::string> sku_of;
  for (const nlohmann::json& r : doc["ranks"]) sku_of[r["rank"].get<int>()] = r["sku"];
  std::map<std::string, std::map<std::string, std::vector<double>>> values;
  for (const nlohmann::json& c : doc["checks"]) {
    const std::string name = c["name"];
    if (!is_rate_figure(name) || !c["rank"].is_number() || !c["measured"].is_number() ||
        c.contains("report")) {
      continue;
    }
    values[name][sku_of[c["rank"].get<int>()]].push_back(c["measured"].get<double>());
  }
  if (values.empty()) {
    throw UsageError("--baseline " + path +
                     ": holds no GEMM or memory rate of a rank; give the accept.json of a "
                     "known-good node");
  }
  SiteFigures f;
  f.source = "--baseline " + path + ": the median of its ranks of the SKU";
  f.gemm_n = doc["meta"]["gemm_n"].get<std::int64_t>();
  f.backend = doc["meta"]["backend"].get<std::string>();
  for (const auto& [name, by_sku] : values) {
    for (const auto& [sku, v] : by_sku) f.value[name][sku] = median(v);
  }
  return f;
}

std::optional<double> site_value(const SiteFigures& f, const std::string& figure,
                                 const std::string& sku) {
  const auto it = f.value.find(figure);
  if (it == f.value.end()) return std::nullopt;
  for (const std::string& key : {sku, std::string()}) {
    if (const auto v = it->second.find(key); v != it->second.end()) return v->second;
  }
  return std::nullopt;
}

void check_site_comparable(const SiteFigures& f, std::int64_t gemm_n, const std::string& backend) {
  if (f.gemm_n && *f.gemm_n != gemm_n) {
    throw UsageError(f.source.substr(0, f.source.find(':')) + " measured its GEMM at n = " +
                     std::to_string(*f.gemm_n) + ", this run at n = " + std::to_string(gemm_n) +
                     ": give --gemm-n " + std::to_string(*f.gemm_n) + " to compare them");
  }
  if (!f.backend.empty() && f.backend != backend) {
    throw UsageError(f.source.substr(0, f.source.find(':')) + " ran on the " + f.backend +
                     " backend, this run on " + backend + ": give a baseline of the same backend");
  }
}

void check_site_skus(const SiteFigures& f, const std::vector<std::string>& skus) {
  for (const auto& [name, by_sku] : f.value) {
    for (const std::string& sku : std::set<std::string>(skus.begin(), skus.end())) {
      if (site_value(f, name, sku)) continue;
      std::string has;
      for (const auto& [s, v] : by_sku) has += (has.empty() ? "" : ", ") + s;
      throw UsageError(f.source.substr(0, f.source.find(':')) + " has no " + name + " for " + sku +
                       " (it has " + has + "): give a baseline of the same GPU model");
    }
  }
}

}  // namespace moebench
