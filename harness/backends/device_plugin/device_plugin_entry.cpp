// The device backends' entry (harness/backends/registry/device_plugin.hpp): compiled into the
// plugin libmoebench_cuda.so, and into binaries that link the device backends themselves.
#include "harness/backends/cuda/cuda_compute.hpp"
#include "harness/backends/registry/device_plugin.hpp"
#if defined(MOEBENCH_HAVE_NCCL)
#include "harness/backends/nccl/nccl_communicator.hpp"
#endif

namespace moebench {
namespace {

#if defined(MOEBENCH_HAVE_NCCL)
std::unique_ptr<Communicator> nccl(MPI_Comm world, const Topology& topo, Compute& cuda,
                                   double timeout_s) {
  return make_nccl_communicator(world, topo, dynamic_cast<CudaComputeApi&>(cuda), timeout_s);
}
#endif

DevicePluginApi make_api() {
  DevicePluginApi a;
  a.abi = kDevicePluginAbi;
  a.make_cuda_compute = &make_cuda_compute;
#if defined(MOEBENCH_HAVE_NCCL)
  a.make_nccl_communicator = &nccl;
  a.nccl_version = &nccl_version;
#endif
  return a;
}

}  // namespace
}  // namespace moebench

extern "C" __attribute__((visibility("default"))) const moebench::DevicePluginApi*
moebench_device_plugin() {
  static const moebench::DevicePluginApi api = moebench::make_api();
  return &api;
}
