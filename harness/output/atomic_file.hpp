// Report files appear whole or not at all: a reader (a Slurm epilog, a CI step) never sees a
// half-written JSON file, even when a rank dies mid-write.
#pragma once

#include <string>

namespace moebench {

// Writes `content` to "<path>.tmp.<pid>" in the same directory, fsyncs it and renames it over
// `path`. On failure the temporary file is removed and a RuntimeError names the path and cause.
void write_file_atomically(const std::string& path, const std::string& content);

// Checked before a run so a bad destination fails in a second, not after the benchmark: throws
// UsageError ("<flag> <path>: directory <dir> does not exist") when the directory is missing,
// not a directory or not writable, or when `path` is itself a directory.
void ensure_writable_destination(const std::string& path, const std::string& flag = "--out");

}  // namespace moebench
