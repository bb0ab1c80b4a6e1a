#include "harness/output/device_records.hpp"

#include <dlfcn.h>

#include "harness/core/error.hpp"
#include "harness/runtime/mpi_check.hpp"
#if defined(MOEBENCH_HAVE_CUDA)
#include "harness/compute/cuda/cuda_compute.hpp"
#endif
#if defined(MOEBENCH_HAVE_NCCL)
#include "harness/comm/nccl/nccl_communicator.hpp"
#endif

namespace moebench {

std::string nvidia_driver_version() {
#if defined(MOEBENCH_HAVE_CUDA)
  // NVML's C API, declared here so that no header of it is needed: 0 is NVML_SUCCESS, and 80
  // bytes is NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE.
  using InitFn = int (*)();
  using VersionFn = int (*)(char*, unsigned int);
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return "";
  std::string version;
  auto init = reinterpret_cast<InitFn>(dlsym(lib, "nvmlInit_v2"));
  auto get = reinterpret_cast<VersionFn>(dlsym(lib, "nvmlSystemGetDriverVersion"));
  auto shutdown = reinterpret_cast<InitFn>(dlsym(lib, "nvmlShutdown"));
  if (init != nullptr && get != nullptr && init() == 0) {
    char buf[96] = {};
    if (get(buf, sizeof buf - 1) == 0) version = buf;
    if (shutdown != nullptr) shutdown();
  }
  dlclose(lib);
  return version;
#else
  return "";  // no device backend in this binary: nothing to describe
#endif
}

DeviceRecord local_device_record(Compute& compute, int rank, const std::string& host) {
  DeviceRecord d;
  d.rank = rank;
  d.host = host;
#if defined(MOEBENCH_HAVE_CUDA)
  if (const auto* cuda = dynamic_cast<const CudaComputeApi*>(&compute)) {
    const CudaDeviceInfo& i = cuda->device_info();
    d.name = i.name;
    d.uuid = i.uuid;
    d.pci_bus_id = i.pci_bus_id;
    d.memory_bytes = i.total_memory_bytes;
    d.compute_capability = std::to_string(i.compute_capability_major) + "." +
                           std::to_string(i.compute_capability_minor);
    d.driver_version = nvidia_driver_version();
    d.cuda_driver_version = i.driver_cuda_version;
    d.cuda_runtime_version = i.runtime_version;
#if defined(MOEBENCH_HAVE_NCCL)
    d.nccl_version = nccl_version();
#endif
  }
#endif
  return d;
}

std::vector<DeviceRecord> gather_device_records(const MpiRuntime& rt, Compute& compute) {
  if (compute.memory_is_host()) return {};
  const std::string mine = to_json(local_device_record(compute, rt.rank(), rt.host())).dump();
  int length = static_cast<int>(mine.size());
  std::vector<int> lengths(rt.rank() == 0 ? rt.size() : 0);
  check_mpi(MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, rt.world()),
            "MPI_Gather");
  std::vector<int> offsets(lengths.size());
  int total = 0;
  for (std::size_t r = 0; r < lengths.size(); ++r) {
    offsets[r] = total;
    total += lengths[r];
  }
  std::vector<char> all(static_cast<std::size_t>(total));
  check_mpi(MPI_Gatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(),
                        MPI_CHAR, 0, rt.world()),
            "MPI_Gatherv");
  std::vector<DeviceRecord> records;
  for (std::size_t r = 0; r < lengths.size(); ++r) {
    records.push_back(device_record_from_json(
        nlohmann::json::parse(all.begin() + offsets[r], all.begin() + offsets[r] + lengths[r])));
  }
  return records;
}

nlohmann::json to_json(const DeviceRecord& d) {
  return nlohmann::json{{"rank", d.rank},
                        {"host", d.host},
                        {"name", d.name},
                        {"uuid", d.uuid},
                        {"pci_bus_id", d.pci_bus_id},
                        {"memory_bytes", d.memory_bytes},
                        {"compute_capability", d.compute_capability},
                        {"driver_version", d.driver_version},
                        {"cuda_driver_version", d.cuda_driver_version},
                        {"cuda_runtime_version", d.cuda_runtime_version},
                        {"nccl_version", d.nccl_version}};
}

DeviceRecord device_record_from_json(const nlohmann::json& j) {
  DeviceRecord d;
  d.rank = j.at("rank").get<int>();
  d.host = j.at("host").get<std::string>();
  d.name = j.at("name").get<std::string>();
  d.uuid = j.at("uuid").get<std::string>();
  d.pci_bus_id = j.at("pci_bus_id").get<std::string>();
  d.memory_bytes = j.at("memory_bytes").get<std::int64_t>();
  d.compute_capability = j.at("compute_capability").get<std::string>();
  d.driver_version = j.at("driver_version").get<std::string>();
  d.cuda_driver_version = j.at("cuda_driver_version").get<std::string>();
  d.cuda_runtime_version = j.at("cuda_runtime_version").get<std::string>();
  d.nccl_version = j.at("nccl_version").get<std::string>();
  return d;
}

}  // namespace moebench
