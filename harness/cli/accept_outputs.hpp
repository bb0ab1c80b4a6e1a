// The files a site acts on, written by `moebench accept` and `moebench accept-merge` alike:
// accept.json (checked against reports/accept.schema.json before anything is written),
// accept.md, junit.xml and drain.txt, each whole or not at all.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "harness/cli/accept_checks.hpp"

namespace moebench {

// Throws UsageError when a file in `dir` cannot be written (checked before any work).
void check_accept_destination(const std::string& dir, const std::string& flag);

// Writes the four files; prints each failed check as one line on stderr and returns how many
// failed.
int write_accept_outputs(const std::string& dir, const AcceptResult& r,
                         const nlohmann::ordered_json& meta);

}  // namespace moebench
