#include "harness/cli/accept_outputs.hpp"

#include <filesystem>
#include <iostream>

#include "harness/core/error.hpp"
#include "harness/output/atomic_file.hpp"
#include "harness/output/schema.hpp"

namespace moebench {

namespace {
namespace fs = std::filesystem;
constexpr const char* kFiles[] = {"accept.json", "accept.md", "junit.xml", "drain.txt"};
}  // namespace

void check_accept_destination(const std::string& dir, const std::string& flag) {
  fs::create_directories(dir);
  for (const char* f : kFiles) ensure_writable_destination((fs::path(dir) / f).string(), flag);
}

int write_accept_outputs(const std::string& dir, const AcceptResult& r,
                         const nlohmann::ordered_json& meta) {
  const nlohmann::ordered_json doc = accept_json(r, meta);
  const std::vector<std::string> errors =
      schema_errors(nlohmann::json(doc), load_schema("accept.schema.json"));
  MB_CHECK(errors.empty(), "accept.json does not match accept.schema.json: " << errors.front());
  std::string drain;
  for (const std::string& line : drain_lines(r)) drain += line + "\n";
  const fs::path d(dir);
  write_file_atomically((d / "accept.json").string(), doc.dump(2) + "\n");
  write_file_atomically((d / "accept.md").string(), accept_markdown(r, meta));
  write_file_atomically((d / "junit.xml").string(), junit_xml(r));
  write_file_atomically((d / "drain.txt").string(), drain);
  int failed = 0;
  for (const AcceptCheck& x : r.checks) {
    if (x.status != "fail") continue;
    ++failed;
    std::cerr << "moebench: accept FAIL: " << x.name << ": " << x.reason << "\n";
  }
  return failed;
}

}  // namespace moebench
