// The burn-in's GPU telemetry (`moebench accept --duration`): each rank's GPU read through NVML
// in the background, summarized a round at a time (clock, temperature, power, the shares of
// samples slowed down or power-capped), and judged per rank (`burnin_telemetry`): a slowdown
// (heat, the board's hardware slowdown, the power brake) in more than kMaxThrottledShare of the
// samples, or a health counter that grew over the burn-in (uncorrected ECC errors, NVLink or PCIe
// errors), a row remapping pending or an NVLink down at its end, fails the rank. A software power
// cap alone is stated, not failed: it is a GPU at its limit, not a fault.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "harness/cli/accept_checks.hpp"
#include "harness/device/telemetry.hpp"
#include "harness/measure/telemetry.hpp"
#include "harness/runtime/mpi_runtime.hpp"

namespace moebench {

// How often the background sampler reads a GPU during the burn-in.
constexpr double kBurninTelemetryIntervalS = 0.25;

// This rank's GPU through the burn-in: a reading at the start, the sampler's readings (and one at
// each round's end, so that a short round has one) summarized a round at a time, a reading at
// the end. Nothing where NVML cannot be loaded or does not know the GPU (note() says why).
class BurninTelemetry {
 public:
  explicit BurninTelemetry(const NvmlGpuId& id);
  void start();
  void end_round();
  void stop();
  bool available() const { return gpu_ != nullptr; }
  const std::string& note() const { return note_; }
  const std::vector<RoundTelemetry>& rounds() const { return rounds_; }
  // The counters' growth from the start to the end (no samples: no shares).
  GpuTelemetrySummary counters(int rank) const;

 private:
  std::unique_ptr<NvmlGpu> gpu_;
  std::optional<TelemetrySampler> sampler_;
  GpuSample first_, last_;
  std::vector<RoundTelemetry> rounds_;
  std::string note_;
  double elapsed_s_ = 0;
};

// Every rank's rounds and counters on rank 0, where every rank has telemetry; else rank 0's
// `note` says which rank has none and why. Collective.
struct BurninTelemetryAll {
  bool available = false;
  std::string note;
  std::vector<std::vector<RoundTelemetry>> rounds;  // [rank][round]
  std::vector<GpuTelemetrySummary> counters;        // [rank]
};
BurninTelemetryAll gather_burnin_telemetry(const MpiRuntime& rt, const BurninTelemetry& t);

// A round as a fixed number of doubles for gathering (NaN where a figure is unknown), and back.
constexpr std::size_t kRoundDoubles = 6;
void append_round(std::vector<double>& out, const RoundTelemetry& r);
RoundTelemetry round_from(const double* p);

// One `burnin_telemetry` check a rank (stage burnin): its slowdown share over every round's
// samples (measured) against `max_share` (expected), with the counters' findings.
std::vector<AcceptCheck> judge_burnin_telemetry(
    const std::vector<AcceptRank>& ranks, const std::vector<std::vector<RoundTelemetry>>& rounds,
    const std::vector<GpuTelemetrySummary>& counters, double max_share = kMaxThrottledShare);

}  // namespace moebench
