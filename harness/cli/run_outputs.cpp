#include "harness/cli/run_outputs.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

#include "harness/core/error.hpp"
#include "harness/core/human.hpp"
#include "harness/core/regular_file.hpp"
#include "harness/output/atomic_file.hpp"

namespace moebench {

namespace {

bool file_exists(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec);
}

std::uintmax_t file_size(const std::string& path) {
  std::error_code ec;
  const std::uintmax_t n = std::filesystem::file_size(path, ec);
  return ec ? 0 : n;
}

// The same file through any path or link, existing or not yet.
bool same_file(const std::string& a, const std::string& b) {
  std::error_code ec;
  if (std::filesystem::equivalent(a, b, ec)) return true;
  std::error_code ea, eb;
  const auto ca = std::filesystem::weakly_canonical(std::filesystem::absolute(a, ea), ea);
  const auto cb = std::filesystem::weakly_canonical(std::filesystem::absolute(b, eb), eb);
  return !ea && !eb && ca == cb;
}

// A step log's first line is one step's JSON object (StepLog::add): what --step-log may replace,
// and what --out must not.
bool looks_like_step_log(const std::string& path) {
  std::ifstream in(path);
  std::string first;
  if (!std::getline(in, first)) return false;
  try {
    const nlohmann::json j = nlohmann::json::parse(first);
    return j.is_object() && j.contains("step") && j.contains("step_time_s");
  } catch (const std::exception&) {
    return false;
  }
}

std::vector<std::string> report_fallbacks(const CliOptions& o) {
  std::vector<std::string> dirs;
  const std::string log = step_log_path(o);
  if (!log.empty()) {
    const auto slash = log.find_last_of('/');
    dirs.push_back(slash == std::string::npos ? "." : slash == 0 ? "/" : log.substr(0, slash));
  }
  if (const char* tmp = std::getenv("TMPDIR"); tmp != nullptr && *tmp != '\0') {
    dirs.push_back(tmp);
  }
  dirs.push_back("/tmp");
  dirs.push_back(".");
  return dirs;
}

}  // namespace

std::string step_log_path(const CliOptions& o) {
  if (!o.step_log.empty()) return o.step_log;
  return o.out.empty() ? std::string() : o.out + ".steps.jsonl";
}

std::unique_ptr<OutputLock> check_destinations(const CliOptions& o) {
  const std::string log = step_log_path(o);
  if (!o.out.empty()) {
    ensure_writable_destination(o.out);
    if (file_exists(o.out) && looks_like_step_log(o.out)) {
      throw UsageError("--out " + o.out +
                       ": is a step log (a JSON line a step), which the report would replace; "
                       "give the report another name");
    }
  }
  if (!log.empty()) {
    ensure_writable_destination(log, "--step-log", true);
    if (!o.out.empty() && same_file(o.out, log)) {
      throw UsageError("--step-log " + log + ": is also --out; give each its own file");
    }
    if (file_exists(log) && file_size(log) > 0 && !looks_like_step_log(log)) {
      throw UsageError("--step-log " + log +
                       ": exists and is not a step log (a report or another file), which the "
                       "step log would replace; give another name");
    }
  }
  return o.out.empty() ? nullptr : std::make_unique<OutputLock>(o.out, "--out");
}

bool write_report(const CliOptions& o, const std::string& content) {
  const WrittenFile w = write_file_or_elsewhere(o.out, content, report_fallbacks(o));
  if (w.failure.empty()) return false;
  std::cerr << "moebench: " << w.failure << "; the report was written to " << w.path
            << " instead\n";
  return true;
}

StepLog::StepLog(const std::string& path, const RunConfig& c, double flops_per_step)
    : path_(path), c_(c), flops_per_step_(flops_per_step) {
  if (path.empty()) return;
  std::FILE* f = open_regular_for_writing(path, "--step-log");
  fd_ = ::dup(::fileno(f));  // written with write(2), whole lines, no stdio buffer
  std::fclose(f);
  if (fd_ < 0) throw UsageError("--step-log " + path + ": " + std::strerror(errno));
}

StepLog::~StepLog() {
  if (fd_ >= 0) ::close(fd_);
}

StepProgress StepLog::progress(const char* kind, int index, int of, int overall, int total,
                               double step_time_s) const {
  const double world = c_.layout.world;
  return {kind,
          index,
          of,
          overall,
          total,
          step_time_s,
          flops_per_step_ / world / step_time_s / 1e12,
          static_cast<double>(tokens_per_step(c_)) / world / step_time_s};
}

void StepLog::add(const StepProgress& p) {
  if (fd_ < 0) return;
  nlohmann::json j{{"step", p.overall},
                   {"kind", p.kind},
                   {"index", p.index},
                   {"step_time_s", p.step_time_s},
                   {"tflops_per_gpu", p.tflops_per_gpu},
                   {"tokens_per_s_per_gpu", p.tokens_per_s_per_gpu},
                   {"time", iso_time_utc()}};  // when the step ended (UTC)
  const std::string line = j.dump() + "\n";
  std::size_t done = 0;
  int err = 0;
  while (done < line.size()) {
    const ssize_t n = ::pwrite(fd_, line.data() + done, line.size() - done,
                               static_cast<off_t>(size_ + static_cast<long long>(done)));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      err = n < 0 ? errno : ENOSPC;
      break;
    }
    done += static_cast<std::size_t>(n);
  }
  if (err == 0) {
    size_ += static_cast<long long>(line.size());
    return;
  }
  // Cut back to the last whole line; the report, written at the end, keeps every step anyway.
  (void)!::ftruncate(fd_, static_cast<off_t>(size_));
  ::close(fd_);
  fd_ = -1;
  std::cerr << "moebench: warning: --step-log " << path_ << ": writing step " << p.overall
            << " failed (" << std::strerror(err) << "); the log ends at the last whole step, "
            << "the run goes on and its report keeps every step\n";
}

}  // namespace moebench
