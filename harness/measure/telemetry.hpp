// GPU telemetry as plain data, and what it says about a GPU's health: pure functions of recorded
// samples, so they are tested without a GPU. harness/device/telemetry.hpp reads the samples
// through NVML.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace moebench {

// One reading of one GPU. A field NVML does not answer on this GPU stays empty.
struct GpuSample {
  double t_s = 0;  // since the sampler started
  std::optional<double> sm_clock_mhz;
  std::optional<double> memory_clock_mhz;
  std::optional<double> power_w;
  std::optional<double> power_limit_w;
  std::optional<double> temperature_c;
  std::optional<std::uint64_t> clock_event_reasons;  // NVML's clocks-event (throttle) bit mask
  std::optional<std::uint64_t> ecc_corrected;        // volatile counts, since the driver loaded
  std::optional<std::uint64_t> ecc_uncorrected;
  std::optional<std::uint64_t> remapped_rows_pending;  // 1 when a row remapping awaits a reset
  std::optional<int> nvlinks_active;
  std::optional<int> nvlinks_inactive;         // links that exist but are down
  std::optional<std::uint64_t> nvlink_errors;  // replay, recovery and CRC counts summed
  std::optional<std::uint64_t> pcie_replays;
};

// NVML's clocks-event reasons (nvml.h's nvmlClocksEventReason*): the ones that mean the GPU ran
// slower than it could because of heat or power.
constexpr std::uint64_t kClockEventSwPowerCap = 0x4;
constexpr std::uint64_t kClockEventHwSlowdown = 0x8;
constexpr std::uint64_t kClockEventSwThermal = 0x20;
constexpr std::uint64_t kClockEventHwThermal = 0x40;
constexpr std::uint64_t kClockEventHwPowerBrake = 0x80;
constexpr std::uint64_t kThermalReasons = kClockEventSwThermal | kClockEventHwThermal;
constexpr std::uint64_t kPowerReasons =
    kClockEventSwPowerCap | kClockEventHwSlowdown | kClockEventHwPowerBrake;

// The reasons that mean a fault rather than a GPU working at its limit: heat, the board's
// hardware slowdown, the power brake. A software power cap alone is a GPU at its power limit,
// as a GEMM-heavy load runs an H100 or B200 most of the time.
constexpr std::uint64_t kSlowdownReasons =
    kThermalReasons | kClockEventHwSlowdown | kClockEventHwPowerBrake;

// One GPU over one stretch of a burn-in (a round): its SM clock's mean, its hottest reading, its
// power's mean (each empty where no sample has it), and the shares of the samples with a
// slowdown reason (kSlowdownReasons) and with the software power cap.
struct RoundTelemetry {
  int samples = 0;
  int reason_samples = 0;  // those with clocks-event reasons, of which the shares are

  std::optional<double> sm_clock_mhz, temperature_c, power_w;
  double slowdown_share = 0;
  double power_cap_share = 0;
};
RoundTelemetry summarize_round(const std::vector<GpuSample>& samples);

// One GPU over a run: a reading before the timed steps, the readings during them, one after.
struct GpuTelemetry {
  int rank = 0;
  GpuSample start;
  std::vector<GpuSample> during;
  GpuSample end;
};

template <typename T>
struct Range {
  T min{};
  T max{};
  double mean = 0;
};

struct GpuTelemetrySummary {
  int rank = 0;
  int samples = 0;  // during the timed steps
  std::optional<Range<double>> sm_clock_mhz, memory_clock_mhz, power_w, temperature_c;
  std::optional<double> power_limit_w;
  double thermal_throttled_share = 0;  // of the samples during the timed steps
  double power_throttled_share = 0;
  std::uint64_t new_ecc_corrected = 0;  // end - start
  std::uint64_t new_ecc_uncorrected = 0;
  bool remapped_rows_pending = false;
  int nvlinks_inactive = 0;
  std::uint64_t new_nvlink_errors = 0;
  std::uint64_t new_pcie_replays = 0;
};

GpuTelemetrySummary summarize_telemetry(const GpuTelemetry& t);

// A summary <-> a fixed number of doubles, for gathering over MPI (counts stay exact below 2^53).
constexpr std::size_t kTelemetryDoubles = 27;
std::vector<double> flatten(const GpuTelemetrySummary& s);
GpuTelemetrySummary unflatten_telemetry(const double* values);

// What makes the GPU a suspect, each with a reason: thermal or power throttling in more than
// `max_throttled_share` of the samples during the timed steps, new uncorrected ECC errors, new
// corrected ECC errors, a pending row remapping, an NVLink that is down, new NVLink errors, new
// PCIe replays. Empty for a healthy GPU.
struct TelemetryFlag {
  std::string metric;  // "thermal_throttling", "ecc_uncorrected", ...
  double value = 0;
  std::string reason;
};
constexpr double kMaxThrottledShare = 0.05;
std::vector<TelemetryFlag> telemetry_flags(const GpuTelemetrySummary& s,
                                           double max_throttled_share = kMaxThrottledShare);

}  // namespace moebench
