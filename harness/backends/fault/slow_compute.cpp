#include "harness/backends/fault/slow_compute.hpp"

#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>

#include "harness/core/clock.hpp"
#include "harness/core/error.hpp"

namespace moebench {

namespace {

class SlowCompute final : public Compute {
 public:
  SlowCompute(std::unique_ptr<Compute> inner, double factor, SlowWork work, int sdc_every)
      : inner_(std::move(inner)), factor_(factor), work_(work), sdc_every_(sdc_every) {
    MB_CHECK(inner_ != nullptr, "slow compute without a backend to wrap");
    MB_CHECK(factor_ > 1 || (factor_ == 1 && sdc_every_ > 0),
             "slow compute with factor " << factor_ << ", expected > 1");
  }

  ComputeBackend kind() const override { return inner_->kind(); }
  DType activation_dtype() const override { return inner_->activation_dtype(); }
  std::string gemm_path() const override { return inner_->gemm_path(); }
  std::string grouped_gemm_path() const override { return inner_->grouped_gemm_path(); }
  std::string attention_path() const override { return inner_->attention_path(); }
  void synchronize() override { inner_->synchronize(); }
  std::int64_t memory_available_bytes() const override { return inner_->memory_available_bytes(); }
  bool memory_is_host() const override { return inner_->memory_is_host(); }
  std::string memory_domain() const override { return inner_->memory_domain(); }
  std::optional<DeviceInfo> device_info() const override { return inner_->device_info(); }
  std::int64_t reserved_bytes() const override { return inner_->reserved_bytes(); }
  void set_linear_precision(LinearPrecision p) override {
    inner_->set_linear_precision(p);
    Compute::set_linear_precision(p);
  }
  void set_fp8_recipe(Fp8Recipe r) override {
    inner_->set_fp8_recipe(r);
    Compute::set_fp8_recipe(r);
  }
  void begin_step() override { inner_->begin_step(); }
  void set_attention_impl(AttentionImpl a) override {
    inner_->set_attention_impl(a);
    attention_impl_ = a;
  }
  void set_grouped_gemm_impl(GroupedGemmImpl g) override {
    inner_->set_grouped_gemm_impl(g);
    grouped_impl_ = g;
  }
  Fp8GemmCounts fp8_gemm_counts() const override { return inner_->fp8_gemm_counts(); }
  std::optional<KernelCalls> kernel_calls() const override { return inner_->kernel_calls(); }
  int mark() override {
    pay();  // a phase's slowness stays in the phase
    return inner_->mark();
  }
  std::vector<double> mark_times_s() override { return inner_->mark_times_s(); }
  void clear_marks() override { inner_->clear_marks(); }

 protected:
  Tensor do_alloc(std::int64_t rows, std::int64_t cols, DType dtype) override {
    return inner_->alloc(rows, cols, dtype);
  }
  void do_upload(const float* host, const Mat& dst) override {
    slowed([&] { inner_->upload(host, dst); });
  }
  void do_upload_i32(const std::int32_t* host, const Mat& dst) override {
    slowed([&] { inner_->upload_i32(host, dst); });
  }
  void do_download(const Mat& src, float* host) override {
    slowed([&] { inner_->download(src, host); });
  }
  void do_download_i32(const Mat& src, std::int32_t* host) override {
    slowed([&] { inner_->download_i32(src, host); });
  }
  void do_zero(const Mat& x) override {
    slowed([&] { inner_->zero(x); });
  }
  void do_copy(const Mat& src, const Mat& dst) override {
    slowed([&] { inner_->copy(src, dst); });
  }
  void do_axpby(float alpha, const Mat& x, float beta, const Mat& y) override {
    slowed([&] { inner_->axpby(alpha, x, beta, y); });
  }
  void do_fill_random(const Mat& x, std::uint64_t seed, std::uint64_t stream,
                      float scale) override {
    slowed([&] { inner_->fill_random(x, seed, stream, scale); });
  }
  void do_fill(const Mat& x, float value) override {
    slowed([&] { inner_->fill(x, value); });
  }
  void do_gemm(bool ta, bool tb, float alpha, const Mat& a, const Mat& b, float beta,
               const Mat& c) override {
    slowed_as(SlowWork::gemm, [&] { inner_->gemm(ta, tb, alpha, a, b, beta, c); });
    corrupt(c);
  }
  void do_grouped_gemm(bool ta, bool tb, float alpha, std::span<const GemmProblem> p,
                       float beta) override {
    slowed_as(SlowWork::grouped_gemm, [&] { inner_->grouped_gemm(ta, tb, alpha, p, beta); });
  }
  void do_fp8_gemm(bool ta, bool tb, float alpha, const Mat& a, const Mat& b, float beta,
                   const Mat& c) override {
    slowed_as(SlowWork::gemm, [&] { inner_->linear_gemm(ta, tb, alpha, a, b, beta, c); });
    corrupt(c);
  }
  void do_rmsnorm_forward(const Mat& x, const Mat& w, float eps, const Mat& y,
                          const Mat& rstd) override {
    slowed([&] { inner_->rmsnorm_forward(x, w, eps, y, rstd); });
  }
  void do_rmsnorm_backward(const Mat& dy, const Mat& x, const Mat& w, const Mat& rstd,
                           const Mat& dx, const Mat& dw) override {
    slowed([&] { inner_->rmsnorm_backward(dy, x, w, rstd, dx, dw); });
  }
  void do_rope(const Mat& x, std::int64_t seq_len, std::int64_t heads, std::int64_t head_stride,
               std::int64_t offset, std::int64_t dim, float theta, bool inverse) override {
    slowed([&] {
      if (inverse) {
        inner_->rope_backward(x, seq_len, heads, head_stride, offset, dim, theta);
      } else {
        inner_->rope_forward(x, seq_len, heads, head_stride, offset, dim, theta);
      }
    });
  }
  void do_swiglu_forward(const Mat& gate_up, const Mat& out) override {
    slowed([&] { inner_->swiglu_forward(gate_up, out); });
  }
  void do_swiglu_backward(const Mat& gate_up, const Mat& dout, const Mat& dgate_up) override {
    slowed([&] { inner_->swiglu_backward(gate_up, dout, dgate_up); });
  }
  void do_attention_forward(const AttentionShape& s, const AttentionOperands& in, const Mat& out,
                            const Mat& stats) override {
    slowed_as(SlowWork::attention, [&] { inner_->attention_forward(s, in, out, stats); });
  }
  void do_attention_backward(const AttentionShape& s, const AttentionOperands& in, const Mat& out,
                             const Mat& dout, const Mat& stats,
                             const AttentionOperands& grad) override {
    slowed_as(SlowWork::attention,
              [&] { inner_->attention_backward(s, in, out, dout, stats, grad); });
  }
  void do_router_forward(const RouterParams& p, const Mat& logits, const Mat& bias,
                         std::int64_t first_token, const Mat& scores, const Mat& indices,
                         const Mat& weights) override {
    slowed([&] { inner_->router_forward(p, logits, bias, first_token, scores, indices, weights); });
  }
  void do_router_backward(const RouterParams& p, const Mat& scores, const Mat& indices,
                          const Mat& dweights, const Mat& dlogits) override {
    slowed([&] { inner_->router_backward(p, scores, indices, dweights, dlogits); });
  }
  void do_gather_rows(const Mat& src, const Mat& index, const Mat& dst) override {
    slowed([&] { inner_->gather_rows(src, index, dst); });
  }
  void do_scatter_add_rows(const Mat& src, const Mat& index, const Mat& scale,
                           const Mat& dst) override {
    slowed([&] { inner_->scatter_add_rows(src, index, scale, dst); });
  }
  void do_gather_rows_scaled(const Mat& src, const Mat& index, const Mat& scale,
                             const Mat& dst) override {
    slowed([&] { inner_->gather_rows_scaled(src, index, scale, dst); });
  }
  void do_gathered_row_dot(const Mat& a, const Mat& index, const Mat& b, const Mat& out) override {
    slowed([&] { inner_->gathered_row_dot(a, index, b, out); });
  }
  void do_cross_entropy(const Mat& logits, const Mat& labels, float grad_scale,
                        const Mat& loss) override {
    slowed([&] { inner_->cross_entropy(logits, labels, grad_scale, loss); });
  }
  void do_adamw(const AdamWStep& s, const Mat& param, const Mat& grad, const Mat& m, const Mat& v,
                const Mat& master) override {
    slowed([&] { inner_->adamw(s, param, grad, m, v, master); });
  }

 private:
  using Seconds = std::chrono::duration<double>;

  // Runs op and owes (factor - 1) times as long as it took; the debt is paid once it reaches a
  // millisecond and at every mark.
  //
  // On the host the debt is CPU time, measured on this thread's CPU clock and paid by spinning on
  // it: the slowed rank does factor x the work of its peers and holds its core while it does. A
  // sleep would not survive oversubscription (8 ranks on 2 cores): the operation's wall time
  // includes waiting for a core, and while the slowed rank sleeps its peers get the cores and run
  // faster, so its phases were no longer slower than theirs. Spent CPU time is what the rank
  // itself did, whoever else shares the core, and spinning competes for the core as work does.
  // On a device the operation is synchronised and its wall time is owed as a sleep: the device's
  // time is not this thread's CPU time.
  // An operation of no named kind: slowed only when every operation is.
  template <typename Op>
  void slowed(Op&& op) {
    slowed_as(SlowWork::all, op);
  }

  // sdc: every sdc_every-th GEMM's first output value gets its highest mantissa bit flipped (a
  // change of up to half its magnitude: a broken multiplier, not rounding).
  void corrupt(const Mat& c) {
    if (sdc_every_ <= 0 || c.rows == 0 || c.cols == 0 || ++gemms_ % sdc_every_ != 0) return;
    const Mat first = c.row_slice(0, 1).col_slice(0, 1);
    float v = 0;
    inner_->download(first, &v);
    std::uint32_t bits = 0;
    std::memcpy(&bits, &v, sizeof bits);
    bits ^= std::uint32_t{1} << 22;
    std::memcpy(&v, &bits, sizeof bits);
    inner_->upload(&v, first);
  }

  template <typename Op>
  void slowed_as(SlowWork kind, Op&& op) {
    if (factor_ == 1) {
      op();
      return;
    }
    if (work_ != SlowWork::all && kind != work_) {
      op();
      return;
    }
    const bool device = !inner_->memory_is_host();
    if (device) inner_->synchronize();
    const Seconds start = now(device);
    op();
    if (device) inner_->synchronize();
    owed_ += (now(device) - start) * (factor_ - 1.0);
    if (owed_ >= std::chrono::milliseconds(1)) pay();
  }

  void pay() {
    if (owed_ <= Seconds::zero()) return;
    const bool device = !inner_->memory_is_host();
    const Seconds start = now(device);
    if (device) {
      std::this_thread::sleep_for(owed_);
    } else {
      while (now(false) - start < owed_) {
      }
    }
    owed_ -= now(device) - start;  // an overshoot is credited
  }

  // The device's clock is the wall's; the host's, this thread's CPU time.
  static Seconds now(bool device) {
    if (device) return Clock::now().time_since_epoch();
    return Seconds(thread_cpu_seconds());
  }

  std::unique_ptr<Compute> inner_;
  double factor_;
  SlowWork work_;
  int sdc_every_;
  long long gemms_ = 0;
  Seconds owed_{0};
};

}  // namespace

std::unique_ptr<Compute> make_slow_compute(std::unique_ptr<Compute> inner, double factor,
                                           SlowWork work) {
  return std::make_unique<SlowCompute>(std::move(inner), factor, work, 0);
}

std::unique_ptr<Compute> make_sdc_compute(std::unique_ptr<Compute> inner, int every) {
  MB_CHECK(every >= 1, "sdc compute every " << every << " GEMMs, expected >= 1");
  return std::make_unique<SlowCompute>(std::move(inner), 1.0, SlowWork::all, every);
}

}  // namespace moebench
