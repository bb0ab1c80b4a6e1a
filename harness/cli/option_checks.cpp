#include "harness/cli/option_checks.hpp"

#include <sstream>

#include "harness/core/error.hpp"
#include "workloads/config/run_config.hpp"

namespace moebench::option_checks {

bool on_off(const std::string& flag, const std::string& v) {
  if (v == "on") return true;
  if (v == "off") return false;
  throw UsageError(flag + " " + v + ": expected on or off");
}

std::int64_t grad_bucket_bytes(double mib) {
  if (!(mib >= 0 && mib <= 1048576)) {
    std::ostringstream text;
    text << mib;
    throw UsageError("--grad-bucket-mb " + text.str() +
                     ": expected a size in MiB from 0 (one bucket per layer) to 1048576");
  }
  return static_cast<std::int64_t>(mib * 1048576.0);
}

std::string number_text(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

void check_timeout(double timeout_s) {
  if (!(timeout_s > 0 && timeout_s <= kMaxTimeoutS)) {
    throw UsageError("--timeout " + number_text(timeout_s) +
                     ": must be a number of seconds in (0, 1e6]");
  }
}

void check_health_flags(double mad_k, const std::optional<double>& min_slowdown) {
  if (!(mad_k >= 0 && mad_k <= 1e6)) {
    throw UsageError("--health-mad " + number_text(mad_k) +
                     ": must be a number of robust standard deviations in [0, 1e6] (default 6)");
  }
  if (min_slowdown && !(*min_slowdown >= 0 && *min_slowdown <= 1e6)) {
    throw UsageError("--health-min-slowdown " + number_text(*min_slowdown) +
                     ": must be a fraction in [0, 1e6] (0.1: 10% slower than the median)");
  }
}

}  // namespace moebench::option_checks
