// GPU telemetry through NVML, which comes with the driver and is loaded at run time (never
// linked): clocks, power and its limit, temperature, clocks-event (throttle) reasons, ECC counts,
// pending row remappings, NVLink state and error counters, PCIe replays. The readings are plain
// data (harness/measure/telemetry.hpp), judged there.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "harness/device/nvml_library.hpp"
#include "harness/measure/telemetry.hpp"

namespace moebench {

class NvmlGpu {
 public:
  // The GPU `id` names; nullptr where NVML cannot be loaded or does not know it (`why` then says
  // which).
  static std::unique_ptr<NvmlGpu> open(const NvmlGpuId& id, std::string& why);
  ~NvmlGpu();
  NvmlGpu(const NvmlGpu&) = delete;
  NvmlGpu& operator=(const NvmlGpu&) = delete;

  // One reading of everything NVML answers for this GPU; `t_s` is recorded as given.
  GpuSample read(double t_s) const;

 private:
  struct Api;
  NvmlGpu(std::unique_ptr<Api> api, void* device);
  std::unique_ptr<Api> api_;
  void* device_;
};

// Readings of one GPU in the background, every `interval_s`, between start() and stop().
class TelemetrySampler {
 public:
  TelemetrySampler(const NvmlGpu& gpu, double interval_s) : gpu_(gpu), interval_s_(interval_s) {}
  ~TelemetrySampler() { stop(); }
  void start();
  std::vector<GpuSample> take();  // the readings taken since the last take(); it goes on
  std::vector<GpuSample> stop();  // the readings not yet taken; joins the thread

 private:
  const NvmlGpu& gpu_;
  double interval_s_;
  std::atomic<bool> running_{false};
  std::thread thread_;
  std::mutex mutex_;
  std::vector<GpuSample> samples_;
};

}  // namespace moebench
