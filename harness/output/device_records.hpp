// meta.devices[]: which GPU each rank ran on, with the driver and library versions, gathered to
// rank 0 for the run report.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/compute/compute.hpp"
#include "harness/output/run_record.hpp"
#include "harness/runtime/mpi_runtime.hpp"

namespace moebench {

// This rank's GPU, with `rank` and `host` as given; only those two are set on a backend without
// a device.
DeviceRecord local_device_record(Compute& compute, int rank, const std::string& host);

// Collective over the runtime's world when the backend has a device: every rank's record, in
// rank order, on rank 0 (empty elsewhere). Empty on every rank for a host backend (cpu), with no
// communication: the backend is the same on every rank.
std::vector<DeviceRecord> gather_device_records(const MpiRuntime& rt, Compute& compute);

// The NVIDIA driver's release number ("580.65.06") from NVML, which comes with the driver and is
// loaded at run time (never linked); empty when it cannot be loaded or answers with an error.
std::string nvidia_driver_version();

nlohmann::json to_json(const DeviceRecord& d);
DeviceRecord device_record_from_json(const nlohmann::json& j);

}  // namespace moebench
