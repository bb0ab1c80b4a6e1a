#include "harness/device/device_records.hpp"

#include <cstdio>

#include "harness/backends/registry/registry.hpp"
#include "harness/device/nvml_library.hpp"

namespace moebench {

std::string nvidia_driver_version() {
  // 80 bytes is NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE.
  const NvmlLibrary nvml;
  const auto get = nvml.symbol<int (*)(char*, unsigned int)>("nvmlSystemGetDriverVersion");
  if (!nvml.ok() || get == nullptr) return "";
  char buf[96] = {};
  return get(buf, sizeof buf - 1) == 0 ? std::string(buf) : std::string();
}

std::string nvlink_fabric_key(const std::string& pci_bus_id) {
  // NVML's GPU fabric info, declared here as the driver's nvml.h has it (CUDA 12.2 and later):
  // nvmlGpuFabricInfo_t, NVML_GPU_FABRIC_UUID_LEN 16, NVML_GPU_FABRIC_STATE_COMPLETED 3.
  struct FabricInfo {
    unsigned char cluster_uuid[16];
    int status;  // nvmlReturn_t
    unsigned int clique_id;
    unsigned char state;
  };
  using HandleFn = int (*)(const char*, void**);
  using FabricFn = int (*)(void*, FabricInfo*);
  const NvmlLibrary nvml;
  const auto handle = nvml.symbol<HandleFn>("nvmlDeviceGetHandleByPciBusId_v2");
  const auto fabric = nvml.symbol<FabricFn>("nvmlDeviceGetGpuFabricInfo");
  if (!nvml.ok() || handle == nullptr || fabric == nullptr) return "";
  void* device = nullptr;
  FabricInfo info{};
  if (handle(pci_bus_id.c_str(), &device) != 0 || fabric(device, &info) != 0 || info.state != 3 ||
      info.status != 0) {
    return "";
  }
  char hex[40] = {};
  for (int i = 0; i < 16; ++i) std::snprintf(hex + 2 * i, 3, "%02x", info.cluster_uuid[i]);
  return std::string(hex) + "/" + std::to_string(info.clique_id);
}

std::optional<DeviceRecord> local_device_record(const Compute& compute, int rank,
                                                const std::string& host) {
  const std::optional<DeviceInfo> info = compute.device_info();
  if (!info) return std::nullopt;
  DeviceRecord d;
  d.rank = rank;
  d.host = host;
  d.info = *info;
  d.driver_version = nvidia_driver_version();
  d.nccl_version = nccl_library_version();
  return d;
}

std::vector<DeviceRecord> gather_device_records(const MpiRuntime& rt, const Compute& compute) {
  const std::optional<DeviceRecord> mine = local_device_record(compute, rt.rank(), rt.host());
  if (!mine) return {};
  std::vector<DeviceRecord> records;
  for (const std::string& text : rt.gather_strings_to_root(to_json(*mine).dump())) {
    records.push_back(device_record_from_json(nlohmann::json::parse(text)));
  }
  return records;
}

nlohmann::ordered_json to_json(const DeviceRecord& d) {
  const DeviceInfo& i = d.info;
  nlohmann::ordered_json j{{"rank", d.rank},
                           {"host", d.host},
                           {"name", i.name},
                           {"uuid", i.uuid},
                           {"pci_bus_id", i.pci_bus_id},
                           {"memory_bytes", i.total_memory_bytes},
                           {"compute_capability", std::to_string(i.compute_capability_major) + "." +
                                                      std::to_string(i.compute_capability_minor)},
                           {"cuda_driver_version", i.driver_cuda_version},
                           {"cuda_runtime_version", i.runtime_version}};
  if (!d.driver_version.empty()) j["driver_version"] = d.driver_version;
  if (!d.nccl_version.empty()) j["nccl_version"] = d.nccl_version;
  j["ordinal"] = i.ordinal;
  j["visible_devices"] = i.visible_devices;
  j["multiprocessors"] = i.multiprocessors;
  j["l2_cache_bytes"] = i.l2_cache_bytes;
  j["cublas_version"] = i.cublas_version;
  return j;
}

DeviceRecord device_record_from_json(const nlohmann::json& j) {
  DeviceRecord d;
  DeviceInfo& i = d.info;
  d.rank = j.at("rank").get<int>();
  d.host = j.at("host").get<std::string>();
  i.name = j.at("name").get<std::string>();
  i.uuid = j.at("uuid").get<std::string>();
  i.pci_bus_id = j.at("pci_bus_id").get<std::string>();
  i.total_memory_bytes = j.at("memory_bytes").get<std::int64_t>();
  const std::string cc = j.at("compute_capability").get<std::string>();
  const std::size_t dot = cc.find('.');
  i.compute_capability_major = std::stoi(cc.substr(0, dot));
  i.compute_capability_minor = dot == std::string::npos ? 0 : std::stoi(cc.substr(dot + 1));
  i.driver_cuda_version = j.at("cuda_driver_version").get<std::string>();
  i.runtime_version = j.at("cuda_runtime_version").get<std::string>();
  d.driver_version = j.value("driver_version", "");
  d.nccl_version = j.value("nccl_version", "");
  i.ordinal = j.at("ordinal").get<int>();
  i.visible_devices = j.at("visible_devices").get<int>();
  i.multiprocessors = j.at("multiprocessors").get<int>();
  i.l2_cache_bytes = j.at("l2_cache_bytes").get<std::int64_t>();
  i.cublas_version = j.at("cublas_version").get<std::string>();
  return d;
}

}  // namespace moebench
