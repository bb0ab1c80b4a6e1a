// Errors carry their exit code and enough context to be acted on. `main` catches them, records
// them, and ends every rank with one clear line. Checks never depend on NDEBUG.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace moebench {

// Exit codes are part of the interface (Slurm jobs and CI gate on them).
enum class ExitCode : int {
  ok = 0,
  runtime = 1,       // a failure while running: the rank, host and cause are printed
  usage = 2,         // bad flags, impossible layouts, invalid config or report files
  verification = 3,  // --verify found mismatches against the single-process reference
  claim = 4,         // a scaling-report verdict failed (moebench report)
  health = 5,        // --health-gate: the run named suspects (a slow GPU, rank or node)
  // A collective or transfer did not complete within --timeout: a peer stopped, hung or died.
  // Every rank that waited says what it waited for, and the job ends.
  timeout = 6,
  // SIGTERM, SIGINT, SIGHUP, SIGPIPE, SIGUSR1 or SIGUSR2 (Slurm's time limit or --signal, a
  // cancel, Ctrl-C, a closed terminal or pipe): every rank stopped after the same step and the
  // report says "interrupted", with the steps that finished.
  interrupted = 7,
  // The run's report could not be written to --out (a full disk, a removed directory): it was
  // written to a fallback place, which stderr names, and nothing measured was lost.
  report_elsewhere = 8,
  // `moebench accept`: a check failed; drain.txt names the nodes to drain (none where only the
  // cluster as a whole failed).
  acceptance = 9,
};

class Error : public std::runtime_error {
 public:
  Error(ExitCode code, const std::string& what) : std::runtime_error(what), code_(code) {}
  ExitCode code() const { return code_; }

 private:
  ExitCode code_;
};

// A user mistake: one line saying what is wrong and what would be valid. Exit code 2.
class UsageError : public Error {
 public:
  explicit UsageError(const std::string& what) : Error(ExitCode::usage, what) {}
};

// Something failed at run time (a library call, an allocation, an internal invariant). Exit 1.
class RuntimeError : public Error {
 public:
  explicit RuntimeError(const std::string& what) : Error(ExitCode::runtime, what) {}
};

// A wait that ran past --timeout. Exit code 6.
class TimeoutError : public Error {
 public:
  explicit TimeoutError(const std::string& what) : Error(ExitCode::timeout, what) {}
};

namespace detail {
[[noreturn]] void throw_check_failure(const char* expr, const char* file, int line,
                                      const std::string& message);
}  // namespace detail

}  // namespace moebench

// Internal invariant check, active in every build type.
#define MB_CHECK(cond, msg)                                                                   \
  do {                                                                                        \
    if (!(cond)) {                                                                            \
      std::ostringstream mb_check_os_;                                                        \
      mb_check_os_ << msg;                                                                    \
      ::moebench::detail::throw_check_failure(#cond, __FILE__, __LINE__, mb_check_os_.str()); \
    }                                                                                         \
  } while (0)
