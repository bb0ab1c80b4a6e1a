#include "harness/backends/staged/staged_communicator.hpp"

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "harness/core/error.hpp"

namespace moebench {

namespace {

// The host twin of a device view: the same shape, FP32, contiguous, in `storage`.
Mat host_mat(std::vector<float>& storage, const Mat& like) {
  storage.resize(static_cast<std::size_t>(std::max<std::int64_t>(like.numel(), 1)));
  return Mat{storage.data(), like.rows, like.cols, like.cols, DType::f32};
}

class StagedCommunicator final : public Communicator {
 public:
  StagedCommunicator(std::unique_ptr<Communicator> host, Compute& compute)
      : Communicator(checked(host).topology()), host_(std::move(host)), compute_(compute) {}

  std::string name() const override { return host_->name(); }
  std::string lane_ordering() const override { return host_->lane_ordering(); }

 protected:
  std::vector<std::int64_t> do_alltoall_counts(Group g,
                                               std::span<const std::int64_t> send) override {
    return host_->alltoall_counts(g, send);  // counts are host values already
  }

  void do_alltoallv(Group g, Mat send, std::span<const std::int64_t> send_rows,
                    std::span<const std::int64_t> send_offsets, Mat recv,
                    std::span<const std::int64_t> recv_rows,
                    std::span<const std::int64_t> recv_offsets) override {
    const Mat hs = to_host(send, a_);
    const Mat hr = host_mat(b_, recv);
    host_->alltoallv(g, hs, send_rows, send_offsets, hr, recv_rows, recv_offsets);
    // Only the received ranges go back: rows of recv that no rank writes keep their contents,
    // as they do with a direct MPI_Alltoallv. The host communicator checked the ranges.
    std::vector<std::pair<std::int64_t, std::int64_t>> ranges;  // [first, end)
    for (std::size_t i = 0; i < recv_rows.size(); ++i) {
      if (recv_rows[i] > 0) ranges.emplace_back(recv_offsets[i], recv_offsets[i] + recv_rows[i]);
    }
    std::sort(ranges.begin(), ranges.end());
    std::size_t i = 0;
    while (i < ranges.size()) {
      std::int64_t first = ranges[i].first;
      std::int64_t end = ranges[i].second;
      // Consecutive ranks' rows are usually adjacent: one copy for the run of them.
      for (++i; i < ranges.size() && ranges[i].first <= end; ++i) {
        end = std::max(end, ranges[i].second);
      }
      compute_.upload(b_.data() + first * recv.cols, recv.row_slice(first, end - first));
    }
    compute_.synchronize();
  }

  void do_allreduce_sum(Group g, Mat buf) override {
    const Mat h = to_host(buf, a_);
    host_->allreduce_sum(g, h);
    back(h, buf);
  }

  void do_reduce_scatter_sum(Group g, Mat buf, Mat shard) override {
    const Mat hb = to_host(buf, a_);
    const Mat hs = host_mat(b_, shard);
    host_->reduce_scatter_sum(g, hb, hs);
    back(hs, shard);
  }

  void do_allgather(Group g, Mat shard, Mat buf) override {
    // The shard may sit inside buf (ZeRO-1): it is read before buf is written, so that is fine.
    const Mat hs = to_host(shard, a_);
    const Mat hb = host_mat(b_, buf);
    host_->allgather(g, hs, hb);
    back(hb, buf);
  }

  // Every send staged in a buffer of its own, every receive landing in one, uploaded after.
  void do_batch_p2p(Group g, std::span<const P2POp> ops) override {
    staged_p2p_.resize(ops.size());
    std::vector<P2POp> host_ops;
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const P2POp& op = ops[i];
      const Mat h = op.kind == P2POp::Kind::send ? to_host(op.buf, staged_p2p_[i])
                                                 : host_mat(staged_p2p_[i], op.buf);
      host_ops.push_back(P2POp{op.kind, op.peer, h});
    }
    host_->batch_p2p(g, host_ops);
    for (std::size_t i = 0; i < ops.size(); ++i) {
      if (ops[i].kind == P2POp::Kind::recv && ops[i].buf.numel() > 0) {
        compute_.upload(host_ops[i].buf.as<float>(), ops[i].buf);
      }
    }
    compute_.synchronize();
  }

  void do_barrier(Group g) override {
    compute_.synchronize();
    host_->barrier(g);
  }
  void do_synchronize() override { host_->synchronize(); }

 private:
  static const Communicator& checked(const std::unique_ptr<Communicator>& host) {
    MB_CHECK(host != nullptr, "staged communicator without a host communicator");
    return *host;
  }

  Mat to_host(const Mat& device, std::vector<float>& storage) {
    const Mat h = host_mat(storage, device);
    if (device.numel() > 0) compute_.download(device, storage.data());  // synchronises
    return h;
  }

  // Uploads and waits, so the collective is complete on return (as the mpi backend's are) and
  // the host buffers may be reused by the next one whatever the backend's upload does.
  void back(const Mat& host, const Mat& device) {
    if (device.numel() > 0) compute_.upload(host.as<float>(), device);
    compute_.synchronize();
  }

  std::unique_ptr<Communicator> host_;
  Compute& compute_;
  std::vector<float> a_;                        // staged inputs
  std::vector<float> b_;                        // staged outputs
  std::vector<std::vector<float>> staged_p2p_;  // one per transfer of a batch
};

}  // namespace

std::unique_ptr<Communicator> make_staged_communicator(std::unique_ptr<Communicator> host,
                                                       Compute& compute) {
  return std::make_unique<StagedCommunicator>(std::move(host), compute);
}

}  // namespace moebench
