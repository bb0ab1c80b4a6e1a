// The staging wrapper of `--comm mpi` on a device backend, with a fake "device": a cpu backend
// whose memory_is_host() is false and whose tensors are stored as BF16, which the mpi backend
// refuses to touch, so only a staged path can pass. Values are small integers, exact in BF16 and
// in sums, so every check is ==.
#include "harness/backends/staged/staged_communicator.hpp"
#include "harness/backends/mpi/mpi_communicator.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "harness/backends/cpu/cpu_compute.hpp"
#include "harness/backends/registry/registry.hpp"
#include "harness/core/error.hpp"
#include "harness/runtime/mpi_runtime.hpp"

namespace moebench {
namespace {

std::uint16_t to_bf16(float f) {  // truncation: the test values are exact in BF16
  std::uint32_t bits = 0;
  std::memcpy(&bits, &f, 4);
  return static_cast<std::uint16_t>(bits >> 16);
}

float from_bf16(std::uint16_t h) {
  const std::uint32_t bits = static_cast<std::uint32_t>(h) << 16;
  float f = 0;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Host memory pretending to be a device: BF16 or FP32 storage, honouring ld, counting transfers.
class FakeDevice final : public CpuCompute {
 public:
  FakeDevice() : CpuCompute(1) {}
  DType activation_dtype() const override { return DType::bf16; }
  bool memory_is_host() const override { return false; }

  Tensor do_alloc(std::int64_t rows, std::int64_t cols, DType dtype) override {
    const std::size_t bytes = static_cast<std::size_t>(rows * cols) * dtype_size(dtype);
    return Tensor(std::shared_ptr<void>(std::calloc(bytes + 16, 1), std::free), rows, cols, dtype);
  }
  void do_upload(const float* host, const Mat& dst) override {
    ++uploads;
    for (std::int64_t r = 0; r < dst.rows; ++r) {
      for (std::int64_t c = 0; c < dst.cols; ++c) set(dst, r, c, host[r * dst.cols + c]);
    }
  }
  void do_download(const Mat& src, float* host) override {
    ++downloads;
    for (std::int64_t r = 0; r < src.rows; ++r) {
      for (std::int64_t c = 0; c < src.cols; ++c) host[r * src.cols + c] = get(src, r, c);
    }
  }
  void synchronize() override { ++syncs; }

  static float get(const Mat& m, std::int64_t r, std::int64_t c) {
    const std::int64_t i = r * m.ld + c;
    return m.dtype == DType::bf16 ? from_bf16(m.as<std::uint16_t>()[i]) : m.as<float>()[i];
  }
  static void set(const Mat& m, std::int64_t r, std::int64_t c, float v) {
    const std::int64_t i = r * m.ld + c;
    if (m.dtype == DType::bf16) {
      m.as<std::uint16_t>()[i] = to_bf16(v);
    } else {
      m.as<float>()[i] = v;
    }
  }

  int uploads = 0;
  int downloads = 0;
  int syncs = 0;
};

void fill_rows(const Mat& m, float base) {  // element (r, c) = base + 10 r + c
  for (std::int64_t r = 0; r < m.rows; ++r) {
    for (std::int64_t c = 0; c < m.cols; ++c) FakeDevice::set(m, r, c, base + 10.0f * r + c);
  }
}

bool row_is(const Mat& m, std::int64_t r, float base) {
  for (std::int64_t c = 0; c < m.cols; ++c) {
    if (FakeDevice::get(m, r, c) != base + c) return false;
  }
  return true;
}

// A host communicator that pretends to be one rank of a 2-rank group (the second rank sends
// what this one sends), recording what it was handed.
class TwoRankHost final : public Communicator {
 public:
  TwoRankHost()
      : Communicator(make_topology(ParallelGrid(2, GridShape{1, 1, 2, 1}), 0, 0, 1, 0, 2)) {}
  std::string name() const override { return "two-rank"; }

 protected:
  std::vector<std::int64_t> do_alltoall_counts(Group, std::span<const std::int64_t> send) override {
    return {send.begin(), send.end()};
  }
  void do_alltoallv(Group, Mat send, std::span<const std::int64_t> send_rows,
                    std::span<const std::int64_t> send_offsets, Mat recv,
                    std::span<const std::int64_t> recv_rows,
                    std::span<const std::int64_t> recv_offsets) override {
    host_views_ok = send.dtype == DType::f32 && recv.dtype == DType::f32 && send.contiguous() &&
                    recv.contiguous();
    for (int peer = 0; peer < 2; ++peer) {
      REQUIRE(recv_rows[peer] == send_rows[0]);
      for (std::int64_t r = 0; r < recv_rows[peer]; ++r) {
        const float* from = send.as<float>() + (send_offsets[0] + r) * send.cols;
        float* to = recv.as<float>() + (recv_offsets[peer] + r) * recv.cols;
        for (std::int64_t c = 0; c < recv.cols; ++c) to[c] = from[c] + 50.0f * peer;
      }
    }
  }
  void do_allreduce_sum(Group, Mat buf) override {
    host_views_ok = buf.dtype == DType::f32 && buf.contiguous();
    for (std::int64_t i = 0; i < buf.numel(); ++i) buf.as<float>()[i] *= 2.0f;
  }
  void do_reduce_scatter_sum(Group, Mat buf, Mat shard) override {
    for (std::int64_t i = 0; i < shard.numel(); ++i) shard.as<float>()[i] = 2 * buf.as<float>()[i];
  }
  void do_allgather(Group, Mat shard, Mat buf) override {
    for (std::int64_t i = 0; i < buf.numel(); ++i) {
      buf.as<float>()[i] = shard.as<float>()[i % shard.numel()];
    }
  }
  // The peer sends back what it receives, plus 100.
  void do_batch_p2p(Group, std::span<const P2POp> ops) override {
    const P2POp* send = nullptr;
    for (const P2POp& op : ops) {
      host_views_ok = op.buf.dtype == DType::f32 && op.buf.contiguous();
      if (op.kind == P2POp::Kind::send) send = &op;
    }
    for (const P2POp& op : ops) {
      if (op.kind != P2POp::Kind::recv) continue;
      REQUIRE(send != nullptr);
      for (std::int64_t i = 0; i < op.buf.numel(); ++i) {
        op.buf.as<float>()[i] = send->buf.as<float>()[i] + 100.0f;
      }
    }
  }
  void do_barrier(Group) override { ++barriers; }
  void do_synchronize() override { ++syncs; }

 public:
  int barriers = 0;
  bool host_views_ok = false;
  int syncs = 0;
};

const Topology kOne = single_process_topology();

TEST_CASE("the mpi backend refuses device (bf16) buffers that the staged one moves") {
  FakeDevice dev;
  Tensor t = dev.alloc(2, 3);
  fill_rows(t, 1.0f);
  auto direct = make_mpi_communicator(MPI_COMM_SELF, kOne);
  CHECK_THROWS_AS(direct->allreduce_sum(Group::world, t), RuntimeError);
  auto staged = make_staged_communicator(make_mpi_communicator(MPI_COMM_SELF, kOne), dev);
  CHECK(staged->name() == "mpi");
  CHECK(staged->info(Group::expert).size == 1);
  staged->allreduce_sum(Group::world, t);  // one rank: the sum is the value itself
  CHECK(row_is(t, 0, 1.0f));
  CHECK(row_is(t, 1, 11.0f));
  CHECK(dev.downloads == 1);
  CHECK(dev.uploads == 1);
  CHECK(dev.syncs >= 1);  // complete on return
}

TEST_CASE("staged alltoallv on MPI_COMM_SELF moves the rows and leaves the others alone") {
  FakeDevice dev;
  Tensor send = dev.alloc(4, 3);
  fill_rows(send, 0.0f);
  Tensor recv_storage = dev.alloc(6, 3);
  const Mat recv = recv_storage.view();
  fill_rows(recv, 100.0f);
  auto staged = make_staged_communicator(make_mpi_communicator(MPI_COMM_SELF, kOne), dev);
  // A strided view is refused by the interface, whatever the backend would do with it.
  Tensor wide = dev.alloc(6, 5);
  const std::vector<std::int64_t> none = {0};
  CHECK_THROWS_WITH_AS(
      staged->alltoallv(Group::expert, send, none, none, wide.view().col_slice(0, 3), none, none),
      doctest::Contains("is strided"), RuntimeError);
  const std::vector<std::int64_t> rows = {2}, send_off = {1}, recv_off = {3};
  staged->alltoallv(Group::expert, send, rows, send_off, recv, rows, recv_off);
  CHECK(row_is(recv, 3, 10.0f));  // send row 1
  CHECK(row_is(recv, 4, 20.0f));  // send row 2
  for (std::int64_t r : {0, 1, 2, 5}) CHECK(row_is(recv, r, 100.0f + 10.0f * r));
  CHECK(dev.uploads == 1);  // only the received range goes back
  CHECK(staged->alltoall_counts(Group::world, std::vector<std::int64_t>{7, 8}) ==
        std::vector<std::int64_t>{7, 8});
}

TEST_CASE("staged reduce-scatter and all-gather on MPI_COMM_SELF, the all-gather in place") {
  FakeDevice dev;
  auto staged = make_staged_communicator(make_mpi_communicator(MPI_COMM_SELF, kOne), dev);
  Tensor buf = dev.alloc(4, 1, DType::f32);  // gradients may be FP32 on a BF16 backend
  fill_rows(buf, 3.0f);
  Tensor shard = dev.alloc(4, 1, DType::f32);
  staged->reduce_scatter_sum(Group::expert_data, buf, shard);
  for (std::int64_t r = 0; r < 4; ++r) CHECK(row_is(shard, r, 3.0f + 10.0f * r));
  Tensor params = dev.alloc(4, 2);
  fill_rows(params, 7.0f);
  staged->allgather(Group::world, params.view().row_slice(0, 4), params);  // shard is buf
  for (std::int64_t r = 0; r < 4; ++r) CHECK(row_is(params, r, 7.0f + 10.0f * r));
}

TEST_CASE("staged results come back from the host communicator, merged ranges in one upload") {
  FakeDevice dev;
  auto host = std::make_unique<TwoRankHost>();
  TwoRankHost* h = host.get();
  auto staged = make_staged_communicator(std::move(host), dev);

  Tensor g = dev.alloc(2, 2);
  fill_rows(g, 1.0f);
  staged->allreduce_sum(Group::world, g);
  CHECK(h->host_views_ok);
  CHECK(FakeDevice::get(g, 0, 0) == 2.0f);  // 1, 2 / 11, 12 doubled
  CHECK(FakeDevice::get(g, 0, 1) == 4.0f);
  CHECK(FakeDevice::get(g, 1, 0) == 22.0f);
  CHECK(FakeDevice::get(g, 1, 1) == 24.0f);

  Tensor send = dev.alloc(3, 2);
  fill_rows(send, 0.0f);
  Tensor recv = dev.alloc(7, 2);
  fill_rows(recv, 150.0f);
  dev.uploads = 0;
  // Rank 0's two rows land at [0, 2), rank 1's at [2, 4): adjacent, one upload.
  const std::vector<std::int64_t> rows = {2, 2}, send_off = {1, 0}, adjacent = {0, 2};
  staged->alltoallv(Group::expert, send, rows, send_off, recv, rows, adjacent);
  CHECK(h->host_views_ok);
  CHECK(dev.uploads == 1);
  CHECK(row_is(recv, 0, 10.0f));
  CHECK(row_is(recv, 1, 20.0f));
  CHECK(row_is(recv, 2, 60.0f));
  CHECK(row_is(recv, 3, 70.0f));
  for (std::int64_t r : {4, 5, 6}) CHECK(row_is(recv, r, 150.0f + 10.0f * r));

  // A gap between the two ranges: two uploads, the gap untouched.
  fill_rows(recv, 150.0f);
  dev.uploads = 0;
  const std::vector<std::int64_t> gap = {5, 0};
  staged->alltoallv(Group::expert, send, rows, send_off, recv, rows, gap);
  CHECK(dev.uploads == 2);
  CHECK(row_is(recv, 0, 60.0f));
  CHECK(row_is(recv, 5, 10.0f));
  for (std::int64_t r : {2, 3, 4}) CHECK(row_is(recv, r, 150.0f + 10.0f * r));

  // Point-to-point: the send goes down staged, the receive comes back up.
  Tensor out = dev.alloc(2, 2);
  fill_rows(out, 1.0f);
  Tensor in = dev.alloc(2, 2);
  fill_rows(in, 0.0f);
  h->host_views_ok = false;
  const std::vector<P2POp> ops = {{P2POp::Kind::send, 1, out}, {P2POp::Kind::recv, 1, in}};
  staged->batch_p2p(Group::world, ops);
  CHECK(h->host_views_ok);
  CHECK(row_is(in, 0, 101.0f));
  CHECK(row_is(in, 1, 111.0f));

  staged->synchronize();
  CHECK(h->syncs == 1);
}

}  // namespace
}  // namespace moebench
