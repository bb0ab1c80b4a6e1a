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

void check_trainer_features(int tp, bool sequence_parallel,
                            const std::string& recompute_granularity,
                            const std::string& pipeline_schedule, bool fsdp,
                            const std::string& optimizer) {
  // What follows every refusal: the step and the model are one; a feature neither has is refused
  // rather than priced as moebench's own step under another name.
  const std::string tail =
      ": moebench's step does not run it and predict does not price it (docs/predicting.md, "
      "\"What the model refuses\")";
  if (tp < 1) throw UsageError("--tp " + std::to_string(tp) + ": must be >= 1");
  if (tp > 1) {
    throw UsageError("--tp " + std::to_string(tp) + ": tensor parallelism" + tail +
                     "; give --tp 1");
  }
  if (sequence_parallel) {
    throw UsageError("--sequence-parallel: sequence parallelism (with tensor parallelism)" + tail);
  }
  if (recompute_granularity == "full") {
    throw UsageError("--recompute-granularity full: full-layer recompute" + tail +
                     "; give --recompute MODULES (selective)");
  }
  if (recompute_granularity != "selective") {
    throw UsageError("--recompute-granularity " + recompute_granularity +
                     ": expected selective (--recompute's modules) or full");
  }
  if (pipeline_schedule == "dualpipe") {
    throw UsageError("--pipeline-schedule dualpipe: DeepSeek's DualPipe schedule" + tail +
                     "; give --pipeline-schedule 1f1b (interleaved with --vp > 1)");
  }
  if (pipeline_schedule != "1f1b") {
    throw UsageError("--pipeline-schedule " + pipeline_schedule +
                     ": expected 1f1b (interleaved with --vp > 1) or dualpipe");
  }
  if (fsdp) {
    throw UsageError(
        "--use-megatron-fsdp/--use-torch-fsdp2: fully sharded data parallelism "
        "(FSDP, ZeRO-3)" +
        tail + "; give --grad-reduce reduce-scatter (ZeRO-1) or allreduce");
  }
  if (optimizer == "muon") {
    throw UsageError("--optimizer muon: the Muon optimizer" + tail + "; give adamw or none");
  }
  if (optimizer != "adamw" && optimizer != "none") {
    throw UsageError("--optimizer " + optimizer + ": expected adamw or none (muon is refused)");
  }
}

}  // namespace moebench::option_checks
