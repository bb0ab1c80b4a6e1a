// `moebench accept-merge REPORT... --out DIR [--nodes LIST]`: one process, no MPI. Reads each
// accept report (a file, or accept's --out directory), checks it against accept.schema.json,
// merges them (accept_merge.hpp) and writes the same four files as accept; exit 9 when a check
// failed, 2 when a report is not one.
#include <filesystem>
#include <iostream>

#include "harness/cli/accept_merge.hpp"
#include "harness/cli/accept_outputs.hpp"
#include "harness/cli/commands.hpp"
#include "harness/core/error.hpp"
#include "harness/core/human.hpp"
#include "harness/core/regular_file.hpp"
#include "harness/core/version.hpp"
#include "harness/output/schema.hpp"

namespace moebench {

namespace {

namespace fs = std::filesystem;

// One path: a report file, or a directory whose accept.json is read (none there: a job that
// wrote no report, which the merge names). UsageError for anything else.
AcceptInput read_input(const std::string& path, const nlohmann::json& schema) {
  AcceptInput in{path, std::nullopt};
  std::string file = path;
  if (fs::is_directory(path)) {
    file = (fs::path(path) / "accept.json").string();
    if (!fs::exists(file)) return in;
  } else if (!fs::exists(path)) {
    throw UsageError(path +
                     ": no such file or directory; give accept.json files or accept's --out "
                     "directories");
  }
  const std::string text = read_regular_file(file, "give accept.json files", kMaxInputBytes);
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw UsageError(file + ": not JSON (" + e.what() + "); give the accept.json accept wrote");
  }
  if (!doc.is_object() || doc.value("kind", std::string()) != "moebench.accept") {
    throw UsageError(file +
                     ": not an acceptance report (kind is not moebench.accept); give the "
                     "accept.json moebench accept wrote");
  }
  const std::vector<std::string> errors = schema_errors(doc, schema);
  if (!errors.empty()) {
    throw UsageError(file + ": does not match accept.schema.json: " + errors.front());
  }
  in.doc = std::move(doc);
  return in;
}

}  // namespace

int accept_merge_command(const CliOptions& o) {
  const std::string start = iso_time_utc();
  const nlohmann::json schema = load_schema("accept.schema.json");
  std::vector<AcceptInput> inputs;
  for (const std::string& path : o.files) inputs.push_back(read_input(path, schema));
  const MergedAccept m = merge_accept(inputs, {o.accept.nodes, o.accept.min_slowdown});
  check_accept_destination(o.accept.out, "--out");
  nlohmann::ordered_json meta = {{"tool_version", kToolVersion},
                                 {"git_sha", git_sha()},
                                 {"argv", o.argv},
                                 {"start_time", start}};
  for (const auto& [key, value] : m.meta_fields.items()) meta[key] = value;
  meta["reports"] = m.reports;
  meta["expected_nodes"] = o.accept.nodes;
  const int failed = write_accept_outputs(o.accept.out, m.result, meta);
  if (!o.quiet) {
    std::cout << "# accept-merge: " << m.reports.size() << " report(s), "
              << m.result.node_names.size() << " node(s), " << m.result.checks.size() << " checks, "
              << failed << " failed; " << drain_lines(m.result).size() << " node(s) to drain; "
              << (m.result.passed() ? "PASS" : "FAIL") << " (" << o.accept.out
              << "/accept.json, accept.md, junit.xml, drain.txt)\n";
  }
  return m.result.passed() ? 0 : static_cast<int>(ExitCode::acceptance);
}

}  // namespace moebench
