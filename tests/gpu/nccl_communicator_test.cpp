// The communicators on the cuda backend's device memory: every collective in every group, in
// BF16 and FP32, with integer-valued data whose sums are exact in both (BF16 holds integers up
// to 256 exactly), so every check is ==.
//   mpirun -n W nccl_communicator_test nccl EP        one GPU per rank (W <= GPUs)
//   mpirun -n W nccl_communicator_test mpi EP         the staged path; ranks may share a GPU
//   mpirun -n 2 nccl_communicator_test shared-gpu 1   with one visible GPU: nccl must refuse
// Both also run the started (non-blocking) forms and the batched point-to-point transfers on every
// lane (tests/mpi/started_collectives.hpp).
// nccl with W >= 2 also checks that a collective one peer never joins times out with an error
// naming it, instead of hanging, on either lane, and that barrier() does not wait for the
// background lane. Exit 0 only when every rank passed.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "harness/backends/cuda/cuda_compute.hpp"
#include "harness/backends/registry/registry.hpp"
#include "harness/core/error.hpp"
#include "harness/device/device_records.hpp"
#include "harness/runtime/mpi_runtime.hpp"
#include "tests/mpi/comm_test_support.hpp"
#include "tests/mpi/started_collectives.hpp"

namespace mb = moebench;
using mb::test::Checker;
using mb::test::members;
using mb::test::rows_between;

namespace {

float payload(int s, int d, std::int64_t r, std::int64_t c) {  // < 256: exact in BF16
  return static_cast<float>((s * 37 + d * 11 + r * 5 + c) % 251);
}

class Device {
 public:
  explicit Device(mb::Compute& c) : c_(c) {}
  mb::Tensor put(const std::vector<float>& v, std::int64_t rows, std::int64_t cols, mb::DType t) {
    mb::Tensor x = c_.alloc(rows, cols, t);
    if (!v.empty()) c_.upload(v.data(), x);
    return x;
  }
  std::vector<float> get(const mb::Mat& m) {
    std::vector<float> v(static_cast<std::size_t>(m.numel()));
    if (!v.empty()) c_.download(m, v.data());
    return v;
  }

 private:
  mb::Compute& c_;
};

void test_group(mb::Communicator& comm, mb::Compute& compute, mb::Group g, const mb::Topology& t,
                mb::DType type, Checker& ck) {
  const std::string name = std::string(mb::group_name(g)) + " " + mb::dtype_name(type);
  const std::vector<int> mem = members(g, t);
  const int n = static_cast<int>(mem.size());
  const mb::GroupInfo gi = comm.info(g);
  ck.check(gi.size == n && mem[gi.rank] == t.rank, name + " rank and size");
  const int me = gi.rank;
  Device dev(compute);
  constexpr std::int64_t cols = 3;

  {  // counts, then the rows they announce
    std::vector<std::int64_t> send_counts(n);
    for (int d = 0; d < n; ++d) send_counts[d] = rows_between(me, d);
    const auto recv_counts = comm.alltoall_counts(g, send_counts);
    bool ok = static_cast<int>(recv_counts.size()) == n;
    for (int s = 0; ok && s < n; ++s) ok = recv_counts[s] == rows_between(s, me);
    ck.check(ok, name + " alltoall_counts");

    std::vector<std::int64_t> so(n), ro(n), rr(n);
    std::int64_t send_total = 0, recv_total = 0;
    for (int d = 0; d < n; ++d) {
      so[d] = send_total;
      send_total += send_counts[d];
      ro[d] = recv_total + 1;  // a gap row before each block must stay untouched
      rr[d] = rows_between(d, me);
      recv_total += rr[d] + 1;
    }
    std::vector<float> send(static_cast<std::size_t>(send_total * cols));
    for (int d = 0; d < n; ++d) {
      for (std::int64_t r = 0; r < send_counts[d]; ++r) {
        for (std::int64_t c = 0; c < cols; ++c) send[(so[d] + r) * cols + c] = payload(me, d, r, c);
      }
    }
    const std::vector<float> sentinel(static_cast<std::size_t>(recv_total * cols), -1.0f);
    mb::Tensor ds = dev.put(send, send_total, cols, type);
    mb::Tensor dr = dev.put(sentinel, recv_total, cols, type);
    comm.alltoallv(g, ds, send_counts, so, dr, rr, ro);
    comm.synchronize();
    const std::vector<float> got = dev.get(dr);
    std::vector<float> want = sentinel;
    for (int s = 0; s < n; ++s) {
      for (std::int64_t r = 0; r < rr[s]; ++r) {
        for (std::int64_t c = 0; c < cols; ++c) want[(ro[s] + r) * cols + c] = payload(s, me, r, c);
      }
    }
    ck.check(got == want, name + " alltoallv");
  }
  {  // all-reduce: element i of rank s is (s + 1) + i % 7, sums <= 8 * 15 < 256
    const std::int64_t len = 1000;
    std::vector<float> v(len), want(len);
    for (std::int64_t i = 0; i < len; ++i) {
      v[i] = static_cast<float>(me + 1 + i % 7);
      want[i] = static_cast<float>(n * (n + 1) / 2 + n * (i % 7));
    }
    mb::Tensor d = dev.put(v, len, 1, type);
    comm.allreduce_sum(g, d);
    comm.synchronize();
    ck.check(dev.get(d) == want, name + " allreduce_sum");
  }
  {  // reduce-scatter out of place, then all-gather of the shards in place (ZeRO-1)
    const std::int64_t per = 5;
    std::vector<float> v(per * n);
    for (std::int64_t i = 0; i < per * n; ++i) v[i] = static_cast<float>(me + i % 11);
    mb::Tensor buf = dev.put(v, per * n, 1, type);
    mb::Tensor shard = dev.put({}, per, 1, type);
    comm.reduce_scatter_sum(g, buf, shard);
    comm.synchronize();
    std::vector<float> want(per);
    for (std::int64_t i = 0; i < per; ++i) {
      want[i] = static_cast<float>(n * (n - 1) / 2 + n * ((me * per + i) % 11));
    }
    ck.check(dev.get(shard) == want, name + " reduce_scatter_sum");

    mb::Tensor params = dev.put(std::vector<float>(per * n, -1.0f), per * n, 1, type);
    const mb::Mat own = params.view().row_slice(me * per, per);
    compute.copy(shard, own);
    comm.allgather(g, own, params);
    comm.synchronize();
    std::vector<float> all(per * n);
    for (int s = 0; s < n; ++s) {
      for (std::int64_t i = 0; i < per; ++i) {
        all[s * per + i] = static_cast<float>(n * (n - 1) / 2 + n * ((s * per + i) % 11));
      }
    }
    ck.check(dev.get(params) == all, name + " allgather in place");
  }
}

// A collective that rank 1 never joins must end on rank 0 with an error naming it, in about
// the timeout, rather than hang: a blocking one (critical lane) or a started one on the
// background lane.
void test_timeout(const mb::MpiRuntime& rt, const mb::Topology& topo, mb::Compute& compute,
                  bool started, Checker& ck) {
  auto comm = mb::make_communicator(mb::CommBackend::nccl, rt.world(), topo, compute, 5.0);
  Device dev(compute);
  mb::Tensor d = dev.put(std::vector<float>(16, 1.0f), 16, 1, mb::DType::f32);
  if (rt.rank() == 0) {
    std::string message;
    try {
      if (started) {
        comm->start_allreduce_sum(mb::Group::world, d, mb::CommLane::background);
      } else {
        comm->allreduce_sum(mb::Group::world, d);
      }
      comm->synchronize();
    } catch (const mb::TimeoutError& e) {  // exit 6, as on the mpi backend
      message = e.what();
    }
    const std::string lane = started ? "(background lane)" : "(critical lane)";
    ck.check(message.find("allreduce_sum in the world group " + lane) != std::string::npos &&
                 message.find("did not complete within 5 s") != std::string::npos &&
                 message.find("rank 0 (host ") != std::string::npos,
             "a collective a peer never joins times out naming it: '" + message + "'");
  }
  rt.barrier();  // rank 1 leaves only after rank 0 gave up
}

// barrier() waits for the critical lane, not for gradient buckets on the background lane: rank
// 0 starts a bucket that rank 1 joins only after the barrier. Were the barrier to wait for it,
// rank 0 would time out.
void test_barrier_skips_background(const mb::MpiRuntime& rt, const mb::Topology& topo,
                                   mb::Compute& compute, Checker& ck) {
  auto comm = mb::make_communicator(mb::CommBackend::nccl, rt.world(), topo, compute, 10.0);
  Device dev(compute);
  mb::Tensor d = dev.put(std::vector<float>(16, 1.0f), 16, 1, mb::DType::f32);
  std::string message = "(none)";
  try {
    comm->clear_requests();
    mb::CommRequest r = -1;
    if (rt.rank() == 0)
      r = comm->start_allreduce_sum(mb::Group::world, d, mb::CommLane::background);
    comm->barrier(mb::Group::world);
    if (rt.rank() != 0)
      r = comm->start_allreduce_sum(mb::Group::world, d, mb::CommLane::background);
    comm->wait(r);
    comm->synchronize();
    ck.check(dev.get(d) == std::vector<float>(16, static_cast<float>(rt.size())),
             "the bucket started before the barrier completes after it");
    comm->clear_requests();
  } catch (const mb::RuntimeError& e) {
    message = e.what();
    ck.check(false, "barrier with a background bucket in flight: '" + message + "'");
  }
}

}  // namespace

int main(int argc, char** argv) {
  mb::MpiRuntime rt(&argc, &argv);
  Checker ck;
  ck.rank = rt.rank();
  const std::string mode = argc > 1 ? argv[1] : "nccl";
  const int ep = argc > 2 ? std::atoi(argv[2]) : 1;
  try {
    const mb::Topology topo = rt.topology(mb::ParallelGrid(rt.size(), {1, 1, ep, 1}), 0);
    auto compute = mb::make_compute(mb::ComputeBackend::cuda, topo.local_rank, 1);
    if (mode == "shared-gpu") {
      std::string message = "(none)";
      int code = 0;
      try {
        mb::make_communicator(mb::CommBackend::nccl, rt.world(), topo, *compute, 60.0);
      } catch (const mb::Error& e) {
        message = e.what();
        code = static_cast<int>(e.code());
      }
      ck.check(code == static_cast<int>(mb::ExitCode::usage), "shared GPU: a usage error");
      if (rt.rank() == 0) {
        ck.check(message.find("--comm nccl needs one GPU per rank: ranks 0 and 1") == 0,
                 "shared GPU: rank 0 says why: '" + message + "'");
      }
    } else {
      auto comm =
          mb::make_communicator(mb::parse_comm_backend(mode), rt.world(), topo, *compute, 120.0);
      ck.check(comm->name() == (mode == "nccl" ? "nccl" : "mpi"), "name");
      if (mode == "nccl") {
        // NCCL >= 2.26 orders the lanes' launches itself once the variable is set (here, unless
        // the user set it); older ones get cross-lane events. Either way the report says which.
        const std::string ordering = comm->lane_ordering();
        const char* env = std::getenv("NCCL_LAUNCH_ORDER_IMPLICIT");
        const bool implicit =
            ordering.find("in host order by NCCL_LAUNCH_ORDER_IMPLICIT") != std::string::npos;
        ck.check(implicit ? env != nullptr && std::string(env) != "0"
                          : ordering.find("serialised by cross-lane events") != std::string::npos,
                 "lane ordering: '" + ordering + "'");
      }
      for (mb::DType type : {mb::DType::bf16, mb::DType::f32}) {
        for (mb::Group g : {mb::Group::world, mb::Group::expert, mb::Group::expert_data}) {
          test_group(*comm, *compute, g, topo, type, ck);
        }
      }
      for (mb::DType type : {mb::DType::bf16, mb::DType::f32}) {
        for (mb::CommLane lane :
             {mb::CommLane::critical, mb::CommLane::background, mb::CommLane::pipeline}) {
          for (mb::Group g : {mb::Group::world, mb::Group::expert, mb::Group::expert_data}) {
            mb::test::test_started_forms(*comm, *compute, g, topo, type, lane, ck);
            mb::test::test_p2p(*comm, *compute, g, type, lane, ck);
          }
        }
        mb::test::test_in_flight(*comm, *compute, type, ck);
      }
      const auto devices = mb::gather_device_records(rt, *compute);
      if (rt.rank() == 0) {
        bool ok = static_cast<int>(devices.size()) == rt.size();
        for (const mb::DeviceRecord& d : devices) {
          ok = ok && !d.info.name.empty() && d.info.uuid.rfind("GPU-", 0) == 0 &&
               !d.info.pci_bus_id.empty() && d.info.total_memory_bytes > 0 &&
               !d.nccl_version.empty();
        }
        ck.check(ok, "device records of every rank on rank 0");
      }
      if (mode == "nccl" && rt.size() >= 2) {
        test_barrier_skips_background(rt, topo, *compute, ck);
        test_timeout(rt, topo, *compute, false, ck);
        test_timeout(rt, topo, *compute, true, ck);
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: error: %s\n", rt.rank(), e.what());
    ++ck.failed;
  }
  return mb::test::summarize(rt, ck, mode);
}
