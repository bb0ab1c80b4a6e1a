// The NVML loader on a real GPU: the telemetry of device 0 is read (clocks, power, temperature
// and the counters NVML answers), the sampler takes readings in the background, and the summary
// of a short idle window names no fault. Needs a GPU and its driver; registered where one exists.
#include <doctest/doctest.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "harness/backends/registry/registry.hpp"
#include "harness/device/device_records.hpp"
#include "harness/device/telemetry.hpp"

namespace moebench {
namespace {

TEST_CASE("telemetry: NVML reads device 0 and the sampler records in the background") {
  const char* backend = std::getenv("MOEBENCH_GPU_TEST_BACKEND");
  if (backend != nullptr && std::string(backend) == "cpu") {
    MESSAGE("MOEBENCH_GPU_TEST_BACKEND=cpu: no GPU to read, skipped");
    return;
  }
  const std::unique_ptr<Compute> cuda = make_compute(ComputeBackend::cuda, 0, 1);
  const std::optional<DeviceInfo> info = cuda->device_info();
  REQUIRE(info.has_value());
  std::string why;
  const std::unique_ptr<NvmlGpu> gpu = NvmlGpu::open({info->pci_bus_id, -1}, why);
  REQUIRE_MESSAGE(gpu != nullptr, why);
  const GpuSample s = gpu->read(0);
  // Every data-centre GPU answers these; an H200 idles at about 345 MHz SM and 30-40 C.
  REQUIRE(s.sm_clock_mhz.has_value());
  CHECK(*s.sm_clock_mhz > 0);
  REQUIRE(s.temperature_c.has_value());
  CHECK(*s.temperature_c > 0);
  CHECK(*s.temperature_c < 120);
  REQUIRE(s.power_w.has_value());
  CHECK(*s.power_w > 0);
  CHECK(s.clock_event_reasons.has_value());
  MESSAGE("SM " << *s.sm_clock_mhz << " MHz, " << *s.temperature_c << " C, " << *s.power_w
                << " W, NVLinks active " << s.nvlinks_active.value_or(-1) << ", fabric key '"
                << nvlink_fabric_key(info->pci_bus_id) << "'");

  TelemetrySampler sampler(*gpu, 0.05);
  GpuTelemetry t;
  t.start = gpu->read(0);
  sampler.start();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  t.during = sampler.stop();
  t.end = gpu->read(0.5);
  CHECK(t.during.size() >= 5);  // 10 expected at 20 Hz; half of it on a loaded host
  CHECK(t.during.size() <= 12);
  const GpuTelemetrySummary sum = summarize_telemetry(t);
  CHECK(sum.samples == static_cast<int>(t.during.size()));
  CHECK(sum.sm_clock_mhz.has_value());
  CHECK(sum.new_ecc_uncorrected == 0);
}

}  // namespace
}  // namespace moebench
