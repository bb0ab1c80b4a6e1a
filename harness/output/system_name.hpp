// Who was measured, in one line for people: the accelerator and the software under it, from the
// device records and the libraries a run report's meta holds (the run report and `moebench
// report`, which reads run reports, name a system the same way).
#pragma once

#include <string>

#include <vector>

#include "harness/device/device_records.hpp"

namespace moebench {

struct SystemName {
  std::string accelerator;  // "NVIDIA H200" (distinct models joined by " + "), or "cpu"
  bool gpu = false;
  // "driver 580.65.06, CUDA 13.0, NCCL 2.28.9, Open MPI v4.1.4" (the parts known; distinct
  // values joined by " + "); on the cpu backend the MPI and BLAS libraries.
  std::string software;
};

// From every rank's GPU (none on the cpu backend), the backend and the MPI and BLAS libraries.
SystemName system_name(const std::vector<DeviceRecord>& devices, const std::string& backend,
                       const std::string& mpi_library, const std::string& blas);

// "8 x NVIDIA H200 on 1 node (driver 580.65.06, CUDA 13.0, NCCL 2.28.9, Open MPI v4.1.4)", or
// "4 ranks on 1 node, cpu backend, no GPU (Open MPI v4.1.4, OpenBLAS 0.3.21)".
std::string describe_system(const SystemName& s, int ranks, int nodes);

}  // namespace moebench
