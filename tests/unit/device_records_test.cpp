// Device records: the one serialiser, its round trip (the gather to rank 0 relies on it), and what
// a host backend reports.
#include "harness/device/device_records.hpp"

#include <doctest/doctest.h>

#include "harness/backends/cpu/cpu_compute.hpp"
#include "tests/unit/run_record_fixture.hpp"

namespace moebench {
namespace {

TEST_CASE("a device record survives its JSON round trip field by field") {
  DeviceRecord d = testing::sample_device_record(3);
  d.driver_version = "580.65.06";
  const DeviceRecord e = device_record_from_json(nlohmann::json::parse(to_json(d).dump()));
  CHECK(e.rank == d.rank);
  CHECK(e.host == d.host);
  CHECK(e.info.name == d.info.name);
  CHECK(e.info.uuid == d.info.uuid);
  CHECK(e.info.pci_bus_id == d.info.pci_bus_id);
  CHECK(e.info.total_memory_bytes == d.info.total_memory_bytes);
  CHECK(e.info.compute_capability_major == 9);
  CHECK(e.info.compute_capability_minor == 0);
  CHECK(e.info.ordinal == d.info.ordinal);
  CHECK(e.info.visible_devices == d.info.visible_devices);
  CHECK(e.info.multiprocessors == d.info.multiprocessors);
  CHECK(e.info.l2_cache_bytes == d.info.l2_cache_bytes);
  CHECK(e.info.driver_cuda_version == d.info.driver_cuda_version);
  CHECK(e.info.runtime_version == d.info.runtime_version);
  CHECK(e.info.cublas_version == d.info.cublas_version);
  CHECK(e.driver_version == d.driver_version);
  CHECK(e.nccl_version == d.nccl_version);
}

TEST_CASE("a device record leaves out the versions it does not know") {
  DeviceRecord d = testing::sample_device_record();
  d.nccl_version.clear();
  const nlohmann::ordered_json j = to_json(d);
  CHECK(!j.contains("driver_version"));
  CHECK(!j.contains("nccl_version"));
  CHECK(j.at("compute_capability") == "9.0");
  CHECK(j.at("memory_bytes") == 150754820096);
  const DeviceRecord e = device_record_from_json(nlohmann::json::parse(j.dump()));
  CHECK(e.driver_version.empty());
  CHECK(e.nccl_version.empty());
}

TEST_CASE("a host backend has no device to record; NVML's absence is not an error") {
  CpuCompute cpu(1);
  CHECK(!local_device_record(cpu, 2, "h").has_value());
  const std::string driver = nvidia_driver_version();  // "" without a driver, else a release
  CHECK((driver.empty() || driver.find('.') != std::string::npos));
}

}  // namespace
}  // namespace moebench
