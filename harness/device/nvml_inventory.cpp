#include "harness/device/nvml_inventory.hpp"

#include "harness/device/nvml_library.hpp"

namespace moebench {

namespace {

// nvml.h's values: NVML_SUCCESS 0; nvmlClockType_t NVML_CLOCK_SM 1, NVML_CLOCK_MEM 2;
// nvmlMemoryErrorType_t NVML_MEMORY_ERROR_TYPE_UNCORRECTED 1; nvmlEccCounterType_t
// NVML_VOLATILE_ECC 0; NVML_NVLINK_MAX_LINKS 18; nvmlEnableState_t NVML_FEATURE_ENABLED 1.
constexpr int kOk = 0;
constexpr int kClockSm = 1, kClockMem = 2;
constexpr int kUncorrected = 1, kVolatile = 0;
constexpr unsigned kMaxLinks = 18;

using Device = void*;
using TextFn = int (*)(Device, char*, unsigned);
using ClockFn = int (*)(Device, int, unsigned*);
using UintFn = int (*)(Device, unsigned*);
using EccFn = int (*)(Device, int, int, unsigned long long*);
using RemapFn = int (*)(Device, unsigned*, unsigned*, unsigned*, unsigned*);
using LinkFn = int (*)(Device, unsigned, int*);

std::string text(const NvmlLibrary& nvml, const char* fn, Device d) {
  const auto f = nvml.symbol<TextFn>(fn);
  char buf[128] = {};
  return f != nullptr && f(d, buf, sizeof buf - 1) == kOk ? std::string(buf) : std::string();
}

std::optional<unsigned> number(const NvmlLibrary& nvml, const char* fn, Device d) {
  const auto f = nvml.symbol<UintFn>(fn);
  unsigned v = 0;
  return f != nullptr && f(d, &v) == kOk ? std::optional<unsigned>(v) : std::nullopt;
}

std::optional<unsigned> clock(const NvmlLibrary& nvml, Device d, int type) {
  const auto f = nvml.symbol<ClockFn>("nvmlDeviceGetMaxClockInfo");
  unsigned v = 0;
  return f != nullptr && f(d, type, &v) == kOk ? std::optional<unsigned>(v) : std::nullopt;
}

template <typename T>
void put(nlohmann::ordered_json& j, const char* key, const std::optional<T>& v) {
  j[key] = v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr);
}
template <typename T>
void get(const nlohmann::json& j, const char* key, std::optional<T>& v) {
  if (j.contains(key) && !j[key].is_null()) v = j[key].get<T>();
}

}  // namespace

NvmlRead read_nvml_inventory(const NvmlGpuId& id) {
  const NvmlLibrary nvml;
  std::string why;
  Device d = nvml.device(id, why);
  if (d == nullptr) return {std::nullopt, why};
  NvmlInventory x;
  x.name = text(nvml, "nvmlDeviceGetName", d);
  x.uuid = text(nvml, "nvmlDeviceGetUUID", d);
  x.serial = text(nvml, "nvmlDeviceGetSerial", d);
  x.sm_clock_max_mhz = clock(nvml, d, kClockSm);
  x.mem_clock_max_mhz = clock(nvml, d, kClockMem);
  if (const auto mw = number(nvml, "nvmlDeviceGetPowerManagementLimit", d)) {
    x.power_limit_w = *mw / 1000.0;
  }
  if (const auto ecc = nvml.symbol<EccFn>("nvmlDeviceGetTotalEccErrors")) {
    unsigned long long n = 0;
    if (ecc(d, kUncorrected, kVolatile, &n) == kOk) x.ecc_uncorrected = n;
  }
  if (const auto remap = nvml.symbol<RemapFn>("nvmlDeviceGetRemappedRows")) {
    unsigned corr = 0, unc = 0, pending = 0, failed = 0;
    if (remap(d, &corr, &unc, &pending, &failed) == kOk) {
      x.rows_remapped_uncorrectable = unc;
      x.remap_pending = pending != 0;
      x.remap_failed = failed != 0;
    }
  }
  if (const auto link = nvml.symbol<LinkFn>("nvmlDeviceGetNvLinkState")) {
    int up = 0, links = 0;
    for (unsigned l = 0; l < kMaxLinks; ++l) {
      int active = 0;
      if (link(d, l, &active) != kOk) continue;  // no such link on this GPU
      ++links;
      up += active == 1;
    }
    if (links > 0) {
      x.nvlinks_up = up;
      x.nvlinks = links;
    }
  }
  x.pcie_max_gen = number(nvml, "nvmlDeviceGetMaxPcieLinkGeneration", d);
  x.pcie_max_width = number(nvml, "nvmlDeviceGetMaxPcieLinkWidth", d);
  x.pcie_gen = number(nvml, "nvmlDeviceGetCurrPcieLinkGeneration", d);
  x.pcie_width = number(nvml, "nvmlDeviceGetCurrPcieLinkWidth", d);
  return {x, ""};
}

nlohmann::ordered_json to_json(const NvmlInventory& x) {
  nlohmann::ordered_json j = {{"name", x.name}, {"uuid", x.uuid}, {"serial", x.serial}};
  put(j, "sm_clock_max_mhz", x.sm_clock_max_mhz);
  put(j, "mem_clock_max_mhz", x.mem_clock_max_mhz);
  put(j, "power_limit_w", x.power_limit_w);
  put(j, "ecc_uncorrected", x.ecc_uncorrected);
  put(j, "rows_remapped_uncorrectable", x.rows_remapped_uncorrectable);
  put(j, "remap_pending", x.remap_pending);
  put(j, "remap_failed", x.remap_failed);
  put(j, "nvlinks_up", x.nvlinks_up);
  put(j, "nvlinks", x.nvlinks);
  put(j, "pcie_max_gen", x.pcie_max_gen);
  put(j, "pcie_max_width", x.pcie_max_width);
  put(j, "pcie_gen", x.pcie_gen);
  put(j, "pcie_width", x.pcie_width);
  return j;
}

NvmlInventory nvml_inventory_from_json(const nlohmann::json& j) {
  NvmlInventory x;
  x.name = j.value("name", std::string());
  x.uuid = j.value("uuid", std::string());
  x.serial = j.value("serial", std::string());
  get(j, "sm_clock_max_mhz", x.sm_clock_max_mhz);
  get(j, "mem_clock_max_mhz", x.mem_clock_max_mhz);
  get(j, "power_limit_w", x.power_limit_w);
  get(j, "ecc_uncorrected", x.ecc_uncorrected);
  get(j, "rows_remapped_uncorrectable", x.rows_remapped_uncorrectable);
  get(j, "remap_pending", x.remap_pending);
  get(j, "remap_failed", x.remap_failed);
  get(j, "nvlinks_up", x.nvlinks_up);
  get(j, "nvlinks", x.nvlinks);
  get(j, "pcie_max_gen", x.pcie_max_gen);
  get(j, "pcie_max_width", x.pcie_max_width);
  get(j, "pcie_gen", x.pcie_gen);
  get(j, "pcie_width", x.pcie_width);
  return x;
}

}  // namespace moebench
