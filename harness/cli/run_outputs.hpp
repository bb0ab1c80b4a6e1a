// What `moebench run` writes besides the console: its report (to --out, or where that fails to a
// named fallback: nothing measured is lost to its destination) and its step log (a JSON line a
// step, each written whole or not at all), and the checks that keep the two from aliasing each
// other, another run's output, or a file they would destroy.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "harness/cli/options.hpp"
#include "harness/output/output_lock.hpp"
#include "harness/output/table.hpp"
#include "workloads/config/run_config.hpp"

namespace moebench {

// --step-log, or OUT.steps.jsonl beside --out; none without either.
std::string step_log_path(const CliOptions& o);

// Rank 0, before any step: --out and the step log writable, not the same file, --out not a step
// log and the step log not a report or any other file it would replace; returns the lock that
// makes --out this run's alone while it runs (null without --out). UsageError otherwise.
std::unique_ptr<OutputLock> check_destinations(const CliOptions& o);

// The report's content to --out or, where that fails, to the first fallback that takes it
// (beside the step log, $TMPDIR, /tmp, the working directory), saying where on stderr. Returns
// whether it went elsewhere; RuntimeError only when no place took it.
bool write_report(const CliOptions& o, const std::string& content);

// Rank 0's step log: one JSON line per finished step, written at once, so that a run that dies
// keeps what it measured (the slowest rank's step time, and the rates it gives).
class StepLog {
 public:
  // Opened never through a link and never blocking on a FIFO planted since the destination was
  // checked (open_regular_for_writing); "" for none.
  StepLog(const std::string& path, const RunConfig& c, double flops_per_step);
  ~StepLog();
  StepLog(const StepLog&) = delete;
  StepLog& operator=(const StepLog&) = delete;

  // The step's rates (per GPU, from the slowest rank's time), for the log and the console.
  StepProgress progress(const char* kind, int index, int of, int overall, int total,
                        double step_time_s) const;
  // Appends the step's line whole, or not at all: a failed or short write (a full disk) is cut
  // back to the last whole line, warned about once on stderr, and ends the log; the run goes on.
  void add(const StepProgress& p);

 private:
  std::string path_;
  const RunConfig& c_;
  double flops_per_step_;
  int fd_ = -1;
  long long size_ = 0;  // bytes of whole lines written
};

}  // namespace moebench
