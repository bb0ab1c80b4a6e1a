// Which communication backend serves which compute backend, and the factory's choice between the
// direct and the staged mpi path.
#include "harness/backends/registry/registry.hpp"

#include <doctest/doctest.h>

#include <algorithm>

#include "harness/backends/cpu/cpu_compute.hpp"
#include "harness/core/error.hpp"

namespace moebench {
namespace {

bool built_with_nccl() {
  const std::vector<std::string> b = comm_backends();
  return std::find(b.begin(), b.end(), "nccl") != b.end();
}

TEST_CASE("check_comm_backend: mpi serves every backend, nccl only cuda, others are unknown") {
  CHECK(comm_backends().front() == "mpi");
  CHECK_NOTHROW(check_comm_backend("mpi", "cpu"));
  CHECK_NOTHROW(check_comm_backend("mpi", "cuda"));
  CHECK_THROWS_WITH_AS(check_comm_backend("gloo", "cpu"),
                       doctest::Contains("unknown communication backend"), UsageError);
  if (built_with_nccl()) {
    CHECK_NOTHROW(check_comm_backend("nccl", "cuda"));
    CHECK_THROWS_WITH_AS(check_comm_backend("nccl", "cpu"),
                         doctest::Contains("--comm nccl needs --backend cuda"), UsageError);
  } else {
    CHECK_THROWS_WITH_AS(check_comm_backend("nccl", "cpu"),
                         doctest::Contains("not built into this binary"), UsageError);
  }
}

// A cpu backend that says its memory is not host memory: the factory must stage it.
class DeviceLike final : public CpuCompute {
 public:
  DeviceLike() : CpuCompute(1) {}
  bool memory_is_host() const override { return false; }
  void download(Mat src, float* host) override {
    ++downloads;
    CpuCompute::download(src, host);
  }
  int downloads = 0;
};

TEST_CASE("make_communicator: direct mpi on host memory, staged on a device, checked arguments") {
  const Topology one = single_process_topology();
  std::vector<float> v = {1.0f, 2.0f};
  const Mat m{v.data(), 1, 2, 2, DType::f32};

  CpuCompute cpu(1);
  auto direct = make_communicator("mpi", MPI_COMM_SELF, one, cpu, kDefaultCommTimeoutS);
  CHECK(direct->name() == "mpi");
  direct->allreduce_sum(Group::world, m);
  CHECK(v == std::vector<float>{1.0f, 2.0f});

  DeviceLike dev;
  auto staged = make_communicator("mpi", MPI_COMM_SELF, one, dev, kDefaultCommTimeoutS);
  staged->allreduce_sum(Group::world, m);
  CHECK(dev.downloads == 1);
  CHECK(v == std::vector<float>{1.0f, 2.0f});

  CHECK_THROWS_WITH_AS(make_communicator("mpi", MPI_COMM_SELF, one, cpu, 0.0),
                       doctest::Contains("--timeout"), UsageError);
  CHECK_THROWS_AS(make_communicator("nccl", MPI_COMM_SELF, one, cpu, kDefaultCommTimeoutS),
                  UsageError);
}

}  // namespace
}  // namespace moebench
