// meta.devices[] records: the JSON round trip the gather to rank 0 relies on, and what a host
// backend reports.
#include "harness/output/device_records.hpp"

#include <doctest/doctest.h>

#include "harness/compute/cpu_compute.hpp"

namespace moebench {
namespace {

TEST_CASE("a device record survives its JSON round trip field by field") {
  DeviceRecord d;
  d.rank = 3;
  d.host = "node7";
  d.name = "NVIDIA H200";
  d.uuid = "GPU-8c3a0000-0000-0000-0000-000000000001";
  d.pci_bus_id = "0000:19:00.0";
  d.memory_bytes = 150754820096;  // beyond 32 bits
  d.compute_capability = "9.0";
  d.driver_version = "580.65.06";
  d.cuda_driver_version = "13.0";
  d.cuda_runtime_version = "13.0";
  d.nccl_version = "2.28.9";
  const DeviceRecord e = device_record_from_json(nlohmann::json::parse(to_json(d).dump()));
  CHECK(e.rank == d.rank);
  CHECK(e.host == d.host);
  CHECK(e.name == d.name);
  CHECK(e.uuid == d.uuid);
  CHECK(e.pci_bus_id == d.pci_bus_id);
  CHECK(e.memory_bytes == d.memory_bytes);
  CHECK(e.compute_capability == d.compute_capability);
  CHECK(e.driver_version == d.driver_version);
  CHECK(e.cuda_driver_version == d.cuda_driver_version);
  CHECK(e.cuda_runtime_version == d.cuda_runtime_version);
  CHECK(e.nccl_version == d.nccl_version);
}

TEST_CASE("a host backend has no device to record; NVML's absence is not an error") {
  CpuCompute cpu(1);
  const DeviceRecord d = local_device_record(cpu, 2, "h");
  CHECK(d.rank == 2);
  CHECK(d.host == "h");
  CHECK(d.name.empty());
  CHECK(d.pci_bus_id.empty());
  const std::string driver = nvidia_driver_version();  // "" without a driver, else a release
  CHECK((driver.empty() || driver.find('.') != std::string::npos));
}

}  // namespace
}  // namespace moebench
