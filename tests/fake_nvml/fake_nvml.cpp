// A stand-in for NVML (libnvidia-ml.so.1) that the tests build, so that `moebench accept`'s NVML
// inventory runs on machines without a GPU: put its directory first in LD_LIBRARY_PATH. Every
// GPU is an HGX H100 in good order (18 NVLinks up, 700 W, PCIe Gen5 x16, no ECC error, no row
// remapped; at work: 1980 MHz, 62 C, 650 W, no clocks-event reason) unless MOEBENCH_FAKE_NVML
// says otherwise for a rank (the launcher's rank variable):
//
//   MOEBENCH_FAKE_NVML="rank=3:ecc=2;rank=2:power_w=500,nvlinks_down=2,pcie_width=8,remap_pending=1"
//   MOEBENCH_FAKE_NVML="rank=1:throttle=64"   (clocks-event reasons, here HW thermal slowdown: the
//                                               GPU also reads 1350 MHz and 92 C)
//   MOEBENCH_FAKE_NVML="rank=2:absent=1"      (NVML does not know rank 2's GPU)
//
// Only the functions moebench calls are here, with nvml.h's signatures (handles are opaque).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

struct Gpu {
  unsigned long long ecc = 0;
  unsigned power_mw = 700000;
  unsigned links_down = 0;
  unsigned pcie_width = 16;
  unsigned remap_pending = 0;
  unsigned long long throttle = 0;  // nvmlClocksEventReason bits
  bool absent = false;              // NVML does not know the rank's GPU
};

int my_rank() {
  for (const char* v : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"}) {
    if (const char* s = std::getenv(v)) return std::atoi(s);
  }
  return 0;
}

// This process's GPU, with the faults MOEBENCH_FAKE_NVML gives its rank.
Gpu gpu() {
  Gpu g;
  const char* spec = std::getenv("MOEBENCH_FAKE_NVML");
  if (spec == nullptr) return g;
  const std::string want = "rank=" + std::to_string(my_rank()) + ":";
  std::string all(spec);
  for (std::size_t at = 0; at <= all.size();) {
    const std::size_t end = std::min(all.find(';', at), all.size());
    const std::string item = all.substr(at, end - at);
    at = end + 1;
    if (item.rfind(want, 0) != 0) continue;
    std::string rest = item.substr(want.size());
    for (std::size_t p = 0; p <= rest.size();) {
      const std::size_t q = std::min(rest.find(',', p), rest.size());
      const std::string kv = rest.substr(p, q - p);
      p = q + 1;
      const std::size_t eq = kv.find('=');
      if (eq == std::string::npos) continue;
      const std::string key = kv.substr(0, eq);
      const unsigned long long value = std::strtoull(kv.c_str() + eq + 1, nullptr, 10);
      if (key == "ecc") g.ecc = value;
      if (key == "power_w") g.power_mw = static_cast<unsigned>(value * 1000);
      if (key == "nvlinks_down") g.links_down = static_cast<unsigned>(value);
      if (key == "pcie_width") g.pcie_width = static_cast<unsigned>(value);
      if (key == "remap_pending") g.remap_pending = static_cast<unsigned>(value);
      if (key == "throttle") g.throttle = value;
      if (key == "absent") g.absent = value != 0;
    }
  }
  return g;
}

int copy(char* out, unsigned length, const std::string& s) {
  if (s.size() + 1 > length) return 7;  // NVML_ERROR_INSUFFICIENT_SIZE
  std::memcpy(out, s.c_str(), s.size() + 1);
  return 0;
}

constexpr int kOk = 0, kInvalid = 2, kNotSupported = 3;
constexpr unsigned kGpus = 8, kLinks = 18;

unsigned index_of(void* device) {
  return static_cast<unsigned>(reinterpret_cast<std::size_t>(device) - 1);
}

}  // namespace

extern "C" {

int nvmlInit_v2() {
  return kOk;
}
int nvmlShutdown() {
  return kOk;
}
int nvmlSystemGetDriverVersion(char* out, unsigned length) {
  return copy(out, length, "550.0");
}

int nvmlDeviceGetHandleByIndex_v2(unsigned index, void** device) {
  if (index >= kGpus || gpu().absent) return kInvalid;
  *device = reinterpret_cast<void*>(static_cast<std::size_t>(index) + 1);
  return kOk;
}
int nvmlDeviceGetName(void*, char* out, unsigned length) {
  return copy(out, length, "NVIDIA H100 80GB HBM3");
}
int nvmlDeviceGetUUID(void* d, char* out, unsigned length) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "GPU-fake-%04d-%u", my_rank(), index_of(d));
  return copy(out, length, buf);
}
int nvmlDeviceGetSerial(void* d, char* out, unsigned length) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "1650%04d%02u", my_rank(), index_of(d));
  return copy(out, length, buf);
}
int nvmlDeviceGetMaxClockInfo(void*, int type, unsigned* mhz) {
  *mhz = type == 1 ? 1980 : 2619;  // SM, memory
  return kOk;
}
int nvmlDeviceGetPowerManagementLimit(void*, unsigned* mw) {
  *mw = gpu().power_mw;
  return kOk;
}
int nvmlDeviceGetTotalEccErrors(void*, int, int, unsigned long long* count) {
  *count = gpu().ecc;
  return kOk;
}
int nvmlDeviceGetRemappedRows(void*, unsigned* corr, unsigned* unc, unsigned* pending,
                              unsigned* failed) {
  *corr = 0;
  *unc = gpu().remap_pending;
  *pending = gpu().remap_pending;
  *failed = 0;
  return kOk;
}
int nvmlDeviceGetNvLinkState(void*, unsigned link, int* active) {
  if (link >= kLinks) return kNotSupported;
  *active = link < kLinks - gpu().links_down ? 1 : 0;
  return kOk;
}
// At work (the burn-in's telemetry).
int nvmlDeviceGetClockInfo(void*, int type, unsigned* mhz) {
  *mhz = type == 1 ? (gpu().throttle != 0 ? 1350 : 1980) : 2619;  // SM, memory
  return kOk;
}
int nvmlDeviceGetPowerUsage(void*, unsigned* mw) {
  *mw = 650000;
  return kOk;
}
int nvmlDeviceGetEnforcedPowerLimit(void*, unsigned* mw) {
  *mw = gpu().power_mw;
  return kOk;
}
int nvmlDeviceGetTemperature(void*, int, unsigned* celsius) {
  *celsius = gpu().throttle != 0 ? 92 : 62;
  return kOk;
}
int nvmlDeviceGetCurrentClocksEventReasons(void*, unsigned long long* reasons) {
  *reasons = gpu().throttle;
  return kOk;
}
int nvmlDeviceGetMaxPcieLinkGeneration(void*, unsigned* v) {
  *v = 5;
  return kOk;
}
int nvmlDeviceGetMaxPcieLinkWidth(void*, unsigned* v) {
  *v = gpu().pcie_width;
  return kOk;
}
int nvmlDeviceGetCurrPcieLinkGeneration(void*, unsigned* v) {
  *v = 5;
  return kOk;
}
int nvmlDeviceGetCurrPcieLinkWidth(void*, unsigned* v) {
  *v = gpu().pcie_width;
  return kOk;
}

}  // extern "C"
