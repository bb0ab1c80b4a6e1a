// system_name and describe_system: the GPU model, count and nodes with the driver, CUDA, NCCL and
// MPI versions; distinct values joined; the cpu backend says it has no GPU.
#include "harness/output/system_name.hpp"

#include <doctest/doctest.h>

namespace moebench {
namespace {

DeviceRecord gpu(int rank, const std::string& name, const std::string& driver) {
  DeviceRecord d;
  d.rank = rank;
  d.info.name = name;
  d.info.runtime_version = "13.0";
  d.driver_version = driver;
  d.nccl_version = "2.28.9";
  return d;
}

TEST_CASE("system name: GPUs with their software, in one line") {
  const std::string mpi = "Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4";
  const SystemName h200 = system_name(
      {gpu(0, "NVIDIA H200", "580.65.06"), gpu(1, "NVIDIA H200", "580.65.06")}, "cuda", mpi, "");
  CHECK(h200.gpu);
  CHECK(h200.accelerator == "NVIDIA H200");
  CHECK(h200.software == "driver 580.65.06, CUDA 13.0, NCCL 2.28.9, Open MPI v4.1.4");
  CHECK(describe_system(h200, 16, 2) ==
        "16 x NVIDIA H200 on 2 nodes (driver 580.65.06, CUDA 13.0, NCCL 2.28.9, Open MPI v4.1.4)");
  // A mixed machine says so.
  const SystemName mixed = system_name(
      {gpu(0, "NVIDIA H200", "580.65.06"), gpu(1, "NVIDIA H100 80GB HBM3", "575.57.08")}, "cuda",
      mpi, "");
  CHECK(mixed.accelerator == "NVIDIA H100 80GB HBM3 + NVIDIA H200");
  CHECK(mixed.software.find("driver 575.57.08 + 580.65.06") == 0);
}

TEST_CASE("system name: the cpu backend has no GPU") {
  const SystemName cpu = system_name({}, "cpu", "Open MPI v4.1.4, package: x", "OpenBLAS 0.3.21");
  CHECK_FALSE(cpu.gpu);
  CHECK(cpu.accelerator == "cpu");
  CHECK(cpu.software == "Open MPI v4.1.4, OpenBLAS 0.3.21");
  CHECK(describe_system(cpu, 1, 1) ==
        "1 rank on 1 node, cpu backend, no GPU (Open MPI v4.1.4, OpenBLAS 0.3.21)");
  CHECK(describe_system(cpu, 4, 2).find("4 ranks on 2 nodes") == 0);
}

}  // namespace
}  // namespace moebench
