// The checks of option values that `parse_command_line` (options.cpp) and `resolve_run_config`
// (resolve_config.cpp) share: one line naming the flag and what would be valid.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace moebench::option_checks {

// "on" or "off"; UsageError otherwise.
bool on_off(const std::string& flag, const std::string& v);
// --grad-bucket-mb in bytes; up to 1 TiB, far above any layer's gradients.
std::int64_t grad_bucket_bytes(double mib);
// A number as a person wrote it ("0.1", "1e+06").
std::string number_text(double v);
// --timeout, as run and linkcheck take it.
void check_timeout(double timeout_s);
// --health-mad and --health-min-slowdown, as run and linkcheck take them.
void check_health_flags(double mad_k, const std::optional<double>& min_slowdown);

// The trainer features moebench neither runs nor prices (tensor and sequence parallelism, FSDP,
// full-layer recompute, DualPipe, Muon): UsageError naming the first one given, with what to give
// instead. `optimizer` is --optimizer as typed.
void check_trainer_features(int tp, bool sequence_parallel,
                            const std::string& recompute_granularity,
                            const std::string& pipeline_schedule, bool fsdp,
                            const std::string& optimizer);

}  // namespace moebench::option_checks
