#include "harness/device/nvlink_domains.hpp"

#include "harness/device/device_records.hpp"
#include "harness/parallel/domains.hpp"

namespace moebench {

NvlinkDomains find_nvlink_domains(const MpiRuntime& rt, const Compute& compute, int emulated_size,
                                  int node) {
  if (emulated_size > 0) return {"emulated", emulated_domains(rt.size(), emulated_size)};
  const std::optional<DeviceInfo> gpu = compute.device_info();
  const std::string key = gpu ? nvlink_fabric_key(gpu->pci_bus_id) : std::string();
  if (rt.all_true(!key.empty())) return {"nvml", domains_from_keys(rt.all_gather(key))};
  return {"node", domains_from_keys(rt.all_gather(std::to_string(node)))};
}

}  // namespace moebench
