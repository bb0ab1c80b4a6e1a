// Device identity for the reports: which GPU each rank ran on, with the driver and library
// versions. The one place that reads NVML and the one serialiser of a device, used by the run
// report's meta.devices[], the probe's meta.device and the gather to rank 0.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/compute/compute.hpp"
#include "harness/runtime/mpi_runtime.hpp"

namespace moebench {

// One rank's GPU (device backends only).
struct DeviceRecord {
  int rank = 0;
  std::string host;
  DeviceInfo info;
  std::string driver_version;  // the driver's release ("580.65.06"); empty without NVML
  std::string nccl_version;    // the NCCL library loaded; empty when built without NCCL
};

// This rank's GPU with `rank` and `host` as given; nullopt on a backend without a device.
std::optional<DeviceRecord> local_device_record(const Compute& compute, int rank,
                                                const std::string& host);

// Collective over the runtime's world when the backend has a device: every rank's record, in
// rank order, on rank 0 (empty elsewhere). Empty on every rank for a host backend (cpu), with no
// communication: the backend is the same on every rank.
std::vector<DeviceRecord> gather_device_records(const MpiRuntime& rt, const Compute& compute);

// The NVIDIA driver's release number ("580.65.06") from NVML, which comes with the driver and is
// loaded at run time (never linked); empty when it cannot be loaded or answers with an error.
std::string nvidia_driver_version();

// The NVLink domain of the GPU at `pci_bus_id` as NVML's GPU fabric info names it (multi-node
// NVLink systems such as NVL72: "<cluster UUID in hex>/<clique id>"); empty where NVML cannot be
// loaded, the GPU has no fabric (HGX: its domain is its node) or the fabric is not yet ready.
std::string nvlink_fabric_key(const std::string& pci_bus_id);

// driver_version and nccl_version are left out when empty.
nlohmann::ordered_json to_json(const DeviceRecord& d);
DeviceRecord device_record_from_json(const nlohmann::json& j);

}  // namespace moebench
