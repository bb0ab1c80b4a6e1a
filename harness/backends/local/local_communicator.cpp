#include "harness/backends/local/local_communicator.hpp"

#include "harness/core/error.hpp"

namespace moebench {

namespace {

class LocalCommunicator final : public Communicator {
 public:
  explicit LocalCommunicator(Compute& compute)
      : Communicator(single_process_topology()), compute_(compute) {}

  std::string name() const override { return "local"; }

 protected:
  std::vector<std::int64_t> do_alltoall_counts(Group, std::span<const std::int64_t> send) override {
    return {send.begin(), send.end()};
  }

  void do_alltoallv(Group, Mat send, std::span<const std::int64_t> send_rows,
                    std::span<const std::int64_t> send_offsets, Mat recv,
                    std::span<const std::int64_t> recv_rows,
                    std::span<const std::int64_t> recv_offsets) override {
    MB_CHECK(send_rows[0] == recv_rows[0], "a one-rank all-to-all receives exactly what it sends");
    if (send_rows[0] == 0) return;
    compute_.copy(send.row_slice(send_offsets[0], send_rows[0]),
                  recv.row_slice(recv_offsets[0], recv_rows[0]));
  }

  void do_allreduce_sum(Group, Mat) override {}

  // One rank: the shard is the whole buffer (the interface checked the sizes).
  void do_reduce_scatter_sum(Group, Mat buf, Mat shard) override { compute_.copy(buf, shard); }

  void do_allgather(Group g, Mat shard, Mat buf) override {
    if (!shard_at_own_place(g, shard, buf)) compute_.copy(shard, buf);
  }

  // Every peer is this rank: the i-th send lands in the i-th receive.
  void do_batch_p2p(Group, std::span<const P2POp> ops) override {
    std::vector<Mat> sends, recvs;
    for (const P2POp& op : ops) (op.kind == P2POp::Kind::send ? sends : recvs).push_back(op.buf);
    MB_CHECK(sends.size() == recvs.size(), "a one-rank exchange of "
                                               << sends.size() << " sends and " << recvs.size()
                                               << " receives");
    for (std::size_t i = 0; i < sends.size(); ++i) {
      MB_CHECK(sends[i].numel() == recvs[i].numel(), "send " << i << " has " << sends[i].numel()
                                                             << " elements, its receive "
                                                             << recvs[i].numel());
      if (sends[i].numel() > 0) {
        compute_.copy(sends[i].reshaped(recvs[i].rows, recvs[i].cols), recvs[i]);
      }
    }
  }

  void do_barrier(Group) override {}  // one process: nobody to wait for
  void do_synchronize() override {}

 private:
  Compute& compute_;
};

}  // namespace

std::unique_ptr<Communicator> make_local_communicator(Compute& compute) {
  return std::make_unique<LocalCommunicator>(compute);
}

}  // namespace moebench
