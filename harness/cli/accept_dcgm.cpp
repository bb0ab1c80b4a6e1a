#include "harness/cli/accept_dcgm.hpp"

#include <algorithm>
#include <cctype>

#include "harness/core/error.hpp"

namespace moebench {

namespace {

using nlohmann::json;

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// A result's GPU: gpu_id (a string, or a number in 3.3's Deployment tests), gpu_ids (3.0-3.2),
// or entity_id of entity group 1, the GPUs (4.x); -1 for none, -2 for an entity that is not a
// GPU (a switch, a CPU), which is left out.
int gpu_of(const json& r) {
  for (const char* key : {"gpu_id", "gpu_ids"}) {
    if (!r.contains(key)) continue;
    const json& v = r[key];
    if (v.is_number_integer()) return v.get<int>();
    if (v.is_string()) {
      try {
        return std::stoi(v.get<std::string>());
      } catch (const std::exception&) {
        return -1;
      }
    }
  }
  if (r.contains("entity_id")) {
    const bool gpu =
        r.value("entity_group_id", 1) == 1 && r.value("entity_group", std::string("GPU")) == "GPU";
    return gpu ? r["entity_id"].get<int>() : -2;
  }
  return -1;
}

// The warnings' text: an array of {warning} (or {warnings} in 3.3's Deployment tests), or one
// string (3.0-3.2).
std::string messages(const json& r) {
  if (!r.contains("warnings")) return "";
  const json& w = r["warnings"];
  if (w.is_string()) return w.get<std::string>();
  std::string out;
  if (!w.is_array()) return out;
  for (const json& x : w) {
    std::string text = x.is_string() ? x.get<std::string>() : "";
    if (x.is_object()) {
      for (const char* key : {"warning", "warnings"}) {
        if (x.contains(key) && x[key].is_string()) text = x[key].get<std::string>();
      }
    }
    if (!text.empty()) out += (out.empty() ? "" : "; ") + text;
  }
  return out;
}

void read_one(const json& doc, DcgmDiag& d) {
  const char* root = doc.contains("DCGM Diagnostic") ? "DCGM Diagnostic" : "DCGM GPU Diagnostic";
  if (!doc.contains(root) || !doc[root].is_object()) {
    throw UsageError(
        "not dcgmi diag -j output (neither \"DCGM Diagnostic\" nor \"DCGM GPU Diagnostic\")");
  }
  const json& body = doc[root];
  if (body.contains("runtime_error")) d.runtime_error = body["runtime_error"].get<std::string>();
  const json& meta = doc.contains("metadata") ? doc["metadata"] : doc;
  if (meta.contains("version") && meta["version"].is_string()) d.version = meta["version"];
  if (body.contains("version") && body["version"].is_string()) d.version = body["version"];
  if (meta.contains("Driver Version Detected")) d.driver = meta["Driver Version Detected"];
  if (!body.contains("test_categories")) return;
  for (const json& category : body["test_categories"]) {
    for (const json& test : category.value("tests", json::array())) {
      const std::size_t first = d.results.size();
      for (const json& r : test.value("results", json::array())) {
        if (!r.is_object()) continue;  // null: the GPU did not run it
        const int gpu = gpu_of(r);
        if (gpu == -2) continue;
        const std::string status = lower(r.value("status", std::string("fail")));
        d.results.push_back({category.value("category", std::string("?")),
                             test.value("name", std::string("?")), gpu,
                             status == "pass" || status == "skip" ? status : "fail", messages(r)});
      }
      // 4.x: a test that failed as a whole, no GPU's result failing (a global warning).
      const json summary = test.value("test_summary", json::object());
      const bool gpu_failed =
          std::any_of(d.results.begin() + static_cast<std::ptrdiff_t>(first), d.results.end(),
                      [](const DcgmResult& x) { return x.status == "fail"; });
      if (!gpu_failed && lower(summary.value("status", std::string("pass"))) == "fail") {
        d.results.push_back({category.value("category", std::string("?")),
                             test.value("name", std::string("?")), -1, "fail", messages(summary)});
      }
    }
  }
}

}  // namespace

DcgmDiag parse_dcgm(const json& doc) {
  DcgmDiag d;
  if (!doc.is_object()) throw UsageError("not dcgmi diag -j output (not a JSON object)");
  if (doc.contains("iterations") && doc["iterations"].is_array()) {  // --iterations N
    for (const json& one : doc["iterations"]) read_one(one, d);
  } else {
    read_one(doc, d);
  }
  if (d.results.empty() && d.runtime_error.empty()) {
    throw UsageError("dcgmi diag -j output with no test results");
  }
  return d;
}

std::string dcgm_path(const std::string& pattern, const std::string& node_name) {
  std::string out = pattern;
  for (std::size_t at = out.find("%h"); at != std::string::npos; at = out.find("%h", at)) {
    out.replace(at, 2, node_name);
    at += node_name.size();
  }
  return out;
}

std::vector<AcceptCheck> judge_dcgm(const std::vector<AcceptRank>& ranks, int node,
                                    const std::string& node_name, const DcgmDiag& diag) {
  std::vector<const AcceptRank*> local;  // the node's ranks by local index: GPU i is local[i]'s
  for (const AcceptRank& r : ranks) {
    if (r.node == node) local.push_back(&r);
  }
  const std::string who = "DCGM " + diag.version + " on " + node_name;
  const auto check = [&](const std::string& status, const std::string& reason) {
    AcceptCheck c;
    c.name = "dcgm";
    c.stage = "dcgm";
    c.node = node;
    c.status = status;
    c.source = "dcgmi diag -j (" + who + ", driver " + diag.driver + ")";
    c.reason = reason;
    return c;
  };
  std::vector<AcceptCheck> out;
  if (!diag.runtime_error.empty()) {
    out.push_back(check("fail", who + " did not run its tests: " + diag.runtime_error));
  }
  int passed = 0, skipped = 0;
  for (const DcgmResult& r : diag.results) {
    passed += r.status == "pass";
    skipped += r.status == "skip";
    if (r.status != "fail") continue;
    AcceptCheck c = check("fail", "");
    const std::string test = r.category + "/" + r.test;
    if (r.gpu >= 0 && r.gpu < static_cast<int>(local.size())) {
      const AcceptRank& rank = *local[static_cast<std::size_t>(r.gpu)];
      c.rank = rank.rank;
      c.reason = "rank " + std::to_string(rank.rank) + " on " + rank.host + ": " + test +
                 " failed on GPU " + std::to_string(r.gpu);
    } else if (r.gpu >= 0) {
      c.reason = node_name + ": " + test + " failed on GPU " + std::to_string(r.gpu) +
                 " (no rank of this job uses it)";
    } else {
      c.reason = node_name + ": " + test + " failed";
    }
    if (!r.message.empty()) c.reason += ": " + r.message;
    out.push_back(c);
  }
  if (out.empty()) {
    out.push_back(check("pass", who + ": " + std::to_string(passed) + " results passed, " +
                                    std::to_string(skipped) + " skipped, none failed"));
  }
  return out;
}

}  // namespace moebench
