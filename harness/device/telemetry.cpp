#include "harness/device/telemetry.hpp"

#include <chrono>

namespace moebench {

// NVML's C API, declared as the driver's nvml.h has it, so that no header is needed: 0 is
// NVML_SUCCESS; the enums are passed as their values.
struct NvmlGpu::Api {
  NvmlLibrary nvml;
  int (*clock)(void*, int, unsigned int*) = nullptr;  // NVML_CLOCK_SM 1, NVML_CLOCK_MEM 2
  int (*power)(void*, unsigned int*) = nullptr;       // milliwatts
  int (*power_limit)(void*, unsigned int*) = nullptr;
  int (*temperature)(void*, int, unsigned int*) = nullptr;  // NVML_TEMPERATURE_GPU 0
  int (*reasons)(void*, unsigned long long*) = nullptr;
  // (device, NVML_MEMORY_ERROR_TYPE_CORRECTED 0 / UNCORRECTED 1, NVML_VOLATILE_ECC 0, count)
  int (*ecc)(void*, int, int, unsigned long long*) = nullptr;
  int (*remapped)(void*, unsigned int*, unsigned int*, unsigned int*, unsigned int*) = nullptr;
  int (*nvlink_state)(void*, unsigned int, int*) = nullptr;
  // NVML_NVLINK_ERROR_DL_REPLAY 0, DL_RECOVERY 1, DL_CRC_FLIT 2, DL_CRC_DATA 3
  int (*nvlink_errors)(void*, unsigned int, int, unsigned long long*) = nullptr;
  int (*pcie_replays)(void*, unsigned int*) = nullptr;

  template <typename F>
  void bind(F& f, const char* name) {
    f = nvml.symbol<F>(name);
  }
};

namespace {

constexpr unsigned int kMaxNvlinks = 18;  // NVML_NVLINK_MAX_LINKS

}  // namespace

NvmlGpu::NvmlGpu(std::unique_ptr<Api> api, void* device) : api_(std::move(api)), device_(device) {}
NvmlGpu::~NvmlGpu() = default;

std::unique_ptr<NvmlGpu> NvmlGpu::open(const NvmlGpuId& id, std::string& why) {
  auto api = std::make_unique<Api>();
  void* device = api->nvml.device(id, why);
  if (device == nullptr) return nullptr;
  api->bind(api->clock, "nvmlDeviceGetClockInfo");
  api->bind(api->power, "nvmlDeviceGetPowerUsage");
  api->bind(api->power_limit, "nvmlDeviceGetEnforcedPowerLimit");
  api->bind(api->temperature, "nvmlDeviceGetTemperature");
  api->bind(api->reasons, "nvmlDeviceGetCurrentClocksEventReasons");
  if (api->reasons == nullptr) api->bind(api->reasons, "nvmlDeviceGetCurrentClocksThrottleReasons");
  api->bind(api->ecc, "nvmlDeviceGetTotalEccErrors");
  api->bind(api->remapped, "nvmlDeviceGetRemappedRows");
  api->bind(api->nvlink_state, "nvmlDeviceGetNvLinkState");
  api->bind(api->nvlink_errors, "nvmlDeviceGetNvLinkErrorCounter");
  api->bind(api->pcie_replays, "nvmlDeviceGetPcieReplayCounter");
  return std::unique_ptr<NvmlGpu>(new NvmlGpu(std::move(api), device));
}

GpuSample NvmlGpu::read(double t_s) const {
  GpuSample s;
  s.t_s = t_s;
  const Api& a = *api_;
  unsigned int u = 0;
  unsigned long long ull = 0;
  if (a.clock && a.clock(device_, 1, &u) == 0) s.sm_clock_mhz = u;
  if (a.clock && a.clock(device_, 2, &u) == 0) s.memory_clock_mhz = u;
  if (a.power && a.power(device_, &u) == 0) s.power_w = u / 1000.0;
  if (a.power_limit && a.power_limit(device_, &u) == 0) s.power_limit_w = u / 1000.0;
  if (a.temperature && a.temperature(device_, 0, &u) == 0) s.temperature_c = u;
  if (a.reasons && a.reasons(device_, &ull) == 0) s.clock_event_reasons = ull;
  if (a.ecc && a.ecc(device_, 0, 0, &ull) == 0) s.ecc_corrected = ull;
  if (a.ecc && a.ecc(device_, 1, 0, &ull) == 0) s.ecc_uncorrected = ull;
  unsigned int corrected = 0, uncorrected = 0, pending = 0, failed = 0;
  if (a.remapped && a.remapped(device_, &corrected, &uncorrected, &pending, &failed) == 0) {
    s.remapped_rows_pending = pending;
  }
  if (a.nvlink_state) {
    int active = 0, inactive = 0;
    std::uint64_t errors = 0;
    bool any_errors = false;
    for (unsigned int link = 0; link < kMaxNvlinks; ++link) {
      int on = 0;
      if (a.nvlink_state(device_, link, &on) != 0) continue;  // no such link
      ++(on ? active : inactive);
      if (!a.nvlink_errors) continue;
      for (int counter = 0; counter < 4; ++counter) {
        if (a.nvlink_errors(device_, link, counter, &ull) == 0) {
          errors += ull;
          any_errors = true;
        }
      }
    }
    if (active + inactive > 0) {
      s.nvlinks_active = active;
      s.nvlinks_inactive = inactive;
    }
    if (any_errors) s.nvlink_errors = errors;
  }
  if (a.pcie_replays && a.pcie_replays(device_, &u) == 0) s.pcie_replays = u;
  return s;
}

void TelemetrySampler::start() {
  if (running_.exchange(true)) return;
  thread_ = std::thread([this] {
    const auto begin = std::chrono::steady_clock::now();
    const auto period = std::chrono::duration<double>(interval_s_);
    auto next = begin;
    while (running_.load()) {
      const double t =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
      GpuSample s = gpu_.read(t);
      {
        std::lock_guard<std::mutex> lock(mutex_);
        samples_.push_back(std::move(s));
      }
      next += std::chrono::duration_cast<std::chrono::steady_clock::duration>(period);
      // Sleep in short slices so that stop() returns quickly.
      while (running_.load() && std::chrono::steady_clock::now() < next) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
  });
}

std::vector<GpuSample> TelemetrySampler::take() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<GpuSample> out;
  out.swap(samples_);
  return out;
}

std::vector<GpuSample> TelemetrySampler::stop() {
  if (running_.exchange(false) && thread_.joinable()) thread_.join();
  return take();
}

}  // namespace moebench
