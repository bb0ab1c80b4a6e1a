// The device backends (cuda compute, nccl communication) as a plugin: `libmoebench_cuda.so`
// beside the moebench binary holds them with the CUDA libraries they link (cuBLASLt, cuBLAS,
// cuDNN, NVRTC, NCCL, the CUDA runtime), loaded on first use, so that a run of the cpu backend
// never loads them (cuBLASLt alone is about 145 MB resident in every process). A binary that links
// the device backends itself (the GPU tests) exports the same entry, which is used instead.
#pragma once

#include <memory>
#include <string>

#include <mpi.h>

#include "harness/comm/communicator.hpp"
#include "harness/compute/compute.hpp"
#include "harness/parallel/topology.hpp"

namespace moebench {

// What the plugin gives, by its one exported entry, moebench_device_plugin().
struct DevicePluginApi {
  int abi = 0;  // kDevicePluginAbi of the plugin's build
  std::unique_ptr<Compute> (*make_cuda_compute)(int local_rank) = nullptr;
  // Null where the plugin has no NCCL.
  std::unique_ptr<Communicator> (*make_nccl_communicator)(MPI_Comm world, const Topology& topo,
                                                          Compute& cuda,
                                                          double timeout_s) = nullptr;
  std::string (*nccl_version)() = nullptr;
};
// Bumped whenever DevicePluginApi or a type it passes changes: a plugin of another build is
// refused, not called.
inline constexpr int kDevicePluginAbi = 1;
inline constexpr const char* kDevicePluginEntry = "moebench_device_plugin";
inline constexpr const char* kDevicePluginFile = "libmoebench_cuda.so";

// The device backends: this binary's own entry if it has one, else the plugin beside the binary
// (or in the build folder it was built in), loaded once. UsageError naming the file and the
// loader's reason when it cannot be loaded.
const DevicePluginApi& device_plugin();
// Whether the plugin (or the binary's own entry) is loaded already: nothing is loaded to answer.
bool device_plugin_loaded();

}  // namespace moebench
