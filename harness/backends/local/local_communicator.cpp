#include "harness/backends/local/local_communicator.hpp"

#include "harness/core/error.hpp"

namespace moebench {

namespace {

class LocalCommunicator final : public Communicator {
 public:
  explicit LocalCommunicator(Compute& compute) : compute_(compute) {}

  std::string name() const override { return "local"; }
  GroupInfo info(Group) const override { return {0, 1}; }

  std::vector<std::int64_t> alltoall_counts(Group, std::span<const std::int64_t> send) override {
    return {send.begin(), send.end()};
  }

  void alltoallv(Group, Mat send, std::span<const std::int64_t> send_rows,
                 std::span<const std::int64_t> send_offsets, Mat recv,
                 std::span<const std::int64_t> recv_rows,
                 std::span<const std::int64_t> recv_offsets) override {
    MB_CHECK(send_rows.size() == 1 && send_offsets.size() == 1 && recv_rows.size() == 1 &&
                 recv_offsets.size() == 1,
             "a one-rank all-to-all has one peer");
    MB_CHECK(send_rows[0] == recv_rows[0] && send.cols == recv.cols && send.dtype == recv.dtype,
             "a one-rank all-to-all receives exactly what it sends");
    if (send_rows[0] == 0) return;
    compute_.copy(send.row_slice(send_offsets[0], send_rows[0]),
                  recv.row_slice(recv_offsets[0], recv_rows[0]));
  }

  void allreduce_sum(Group, Mat) override {}

  void reduce_scatter_sum(Group, Mat buf, Mat shard) override {
    MB_CHECK(buf.numel() == shard.numel(), "a one-rank shard is the whole buffer");
    compute_.copy(buf, shard);
  }

  void allgather(Group, Mat shard, Mat buf) override {
    MB_CHECK(buf.numel() == shard.numel(), "a one-rank shard is the whole buffer");
    compute_.copy(shard, buf);
  }

  void barrier(Group) override {}  // one process: nobody to wait for
  void synchronize() override {}

 private:
  Compute& compute_;
};

}  // namespace

std::unique_ptr<Communicator> make_local_communicator(Compute& compute) {
  return std::make_unique<LocalCommunicator>(compute);
}

}  // namespace moebench
