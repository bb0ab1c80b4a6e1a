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
  const std::vector<CommBackend> b = comm_backends();
  return std::find(b.begin(), b.end(), CommBackend::nccl) != b.end();
}

TEST_CASE("check_comm_backend: mpi serves every backend, nccl only cuda, local is not for runs") {
  CHECK(comm_backends().front() == CommBackend::mpi);
  CHECK_NOTHROW(check_comm_backend(CommBackend::mpi, ComputeBackend::cpu));
  CHECK_NOTHROW(check_comm_backend(CommBackend::mpi, ComputeBackend::cuda));
  CHECK_THROWS_AS(check_comm_backend(CommBackend::local, ComputeBackend::cpu), UsageError);
  if (built_with_nccl()) {
    CHECK_NOTHROW(check_comm_backend(CommBackend::nccl, ComputeBackend::cuda));
    CHECK_THROWS_WITH_AS(check_comm_backend(CommBackend::nccl, ComputeBackend::cpu),
                         doctest::Contains("--comm nccl needs --backend cuda"), UsageError);
  } else {
    CHECK_THROWS_WITH_AS(check_comm_backend(CommBackend::nccl, ComputeBackend::cpu),
                         doctest::Contains("not built into this binary"), UsageError);
  }
  // The NCCL version is known exactly when the backend is built.
  CHECK(nccl_library_version().empty() != built_with_nccl());
}

// A cpu backend that says its memory is not host memory: the factory must stage it.
class DeviceLike final : public CpuCompute {
 public:
  DeviceLike() : CpuCompute(1) {}
  bool memory_is_host() const override { return false; }
  void do_download(const Mat& src, float* host) override {
    ++downloads;
    CpuCompute::do_download(src, host);
  }
  int downloads = 0;
};

TEST_CASE("make_communicator: direct mpi on host memory, staged on a device, checked arguments") {
  const Topology one = single_process_topology();
  std::vector<float> v = {1.0f, 2.0f};
  const Mat m{v.data(), 1, 2, 2, DType::f32};

  CpuCompute cpu(1);
  auto direct = make_communicator(CommBackend::mpi, MPI_COMM_SELF, one, cpu, kDefaultCommTimeoutS);
  CHECK(direct->name() == "mpi");
  direct->allreduce_sum(Group::world, m);
  CHECK(v == std::vector<float>{1.0f, 2.0f});

  DeviceLike dev;
  auto staged = make_communicator(CommBackend::mpi, MPI_COMM_SELF, one, dev, kDefaultCommTimeoutS);
  staged->allreduce_sum(Group::world, m);
  CHECK(dev.downloads == 1);
  CHECK(v == std::vector<float>{1.0f, 2.0f});

  CHECK_THROWS_WITH_AS(make_communicator(CommBackend::mpi, MPI_COMM_SELF, one, cpu, 0.0),
                       doctest::Contains("--timeout"), UsageError);
  CHECK_THROWS_AS(
      make_communicator(CommBackend::nccl, MPI_COMM_SELF, one, cpu, kDefaultCommTimeoutS),
      UsageError);
}

}  // namespace
}  // namespace moebench
