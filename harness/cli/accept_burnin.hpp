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

// Every rank's rounds and counters on rank 0, and which ranks have them (`available`; `notes`
// says why not, by rank). `rounds` is the burn-in's count, the same on every rank. Collective.
struct BurninTelemetryAll {
  std::vector<char> available;                      // [rank]
  std::vector<std::string> notes;                   // [rank]: why none, "" where available
  std::vector<std::vector<RoundTelemetry>> rounds;  // [rank][round]; empty where none
  std::vector<GpuTelemetrySummary> counters;        // [rank]
  bool any() const;
  std::string note() const;  // "rank R: why" of the first rank without telemetry, else ""
};
BurninTelemetryAll gather_burnin_telemetry(const MpiRuntime& rt, const BurninTelemetry& t,
                                           std::size_t rounds);

// A round as a fixed number of doubles for gathering (NaN where a figure is unknown), and back.
constexpr std::size_t kRoundDoubles = 7;
void append_round(std::vector<double>& out, const RoundTelemetry& r);
RoundTelemetry round_from(const double* p);

// The counters' limits, DCGM's (GpuHardwareLimits.h): NVLink errors matter from 100 a second
// (its CRC limit; replay, recovery and CRC counts are summed here), PCIe replays from 8 a minute.
constexpr double kMaxNvlinkErrorsPerS = 100;
constexpr double kMaxPcieReplaysPerMin = 8;

// One `burnin_telemetry` check a rank with telemetry (stage burnin), where any rank has it: its
// slowdown share over every round's readings with reasons (measured) against `max_share`
// (expected); new uncorrected ECC errors, a row remapping pending, NVLink errors or PCIe replays
// past DCGM's rates over `duration_s` fail it; corrected ECC errors, NVLinks down (the
// inventory's to judge) and counts under the rates are stated. No reasons from NVML at all: an
// `info` check, the slowdown not known. A rank without telemetry beside ranks with it: `info`,
// with its reason.
std::vector<AcceptCheck> judge_burnin_telemetry(const std::vector<AcceptRank>& ranks,
                                                const BurninTelemetryAll& all, double duration_s,
                                                double max_share = kMaxThrottledShare);

}  // namespace moebench
