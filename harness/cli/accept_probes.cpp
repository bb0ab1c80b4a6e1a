#include "harness/cli/accept_probes.hpp"

#include <chrono>

#include "harness/bench/expert_gemm_case.hpp"
#include "harness/cli/accept_checks.hpp"
#include "harness/compute/mla_attention_case.hpp"
#include "harness/core/clock.hpp"
#include "harness/measure/stats.hpp"
#include "workloads/accounting/accounting.hpp"

namespace moebench {

namespace {

// Seconds of this rank's own work: its thread's CPU time on the host, where ranks share cores
// and a wall clock would time the neighbours too; the wall clock around a synchronised device.
class WorkClock {
 public:
  explicit WorkClock(Compute& c) : c_(c), host_(c.memory_is_host()) {}
  double now() {
    if (!host_) {
      c_.synchronize();
      return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
    }
    return thread_cpu_seconds();
  }

 private:
  Compute& c_;
  bool host_;
};

std::uint64_t checksum(Compute& c, const Mat& m) {
  std::vector<float> host(static_cast<std::size_t>(m.rows * m.cols));
  c.download(m, host.data());
  return fnv1a(host.data(), host.size() * sizeof(float));
}

// `call` once untimed (plans, caches), then `repeats` times: the median time of one, by the
// rank's own work.
template <typename F>
double median_seconds(Compute& c, int repeats, F&& call) {
  call();
  WorkClock clock(c);
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    const double t0 = clock.now();
    call();
    times.push_back(clock.now() - t0);
  }
  return std::max(1e-9, median(times));
}

}  // namespace

GemmProbe probe_gemm(Compute& c, std::int64_t n, int repeats) {
  Tensor a = c.alloc(n, n, DType::f32), b = c.alloc(n, n, DType::f32),
         out = c.alloc(n, n, DType::f32);
  c.fill_random(a.view(), 20261205, 0, 1.0f);
  c.fill_random(b.view(), 20261205, 1, 1.0f);
  c.gemm(false, false, 1.0f, a.view(), b.view(), 0.0f, out.view());  // untimed: plans, caches
  WorkClock clock(c);
  GemmProbe p;
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    const double t0 = clock.now();
    c.gemm(false, false, 1.0f, a.view(), b.view(), 0.0f, out.view());
    times.push_back(clock.now() - t0);
    p.sums.push_back(checksum(c, out.view()));
  }
  p.flops_per_s = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n) /
                  std::max(1e-9, median(times));
  return p;
}

double probe_attention(Compute& c, const ModelConfig& m, std::int64_t seq, int repeats) {
  MlaAttentionCase attention(
      c, MlaDims{m.num_attention_heads, m.qk_nope_head_dim, m.qk_rope_head_dim, m.v_head_dim}, seq,
      20261205);
  return core_attention_flops_per_token(m, seq) * static_cast<double>(seq) /
         median_seconds(c, repeats, [&] { attention.forward_backward(); });
}

double probe_expert_gemms(Compute& c, const ModelConfig& m, std::int64_t experts, std::int64_t rows,
                          int repeats) {
  double flops = 0, seconds = 0;
  for (const GroupedGemmCase& g :
       expert_gemm_cases(experts, rows, m.hidden_size, m.moe_intermediate_size)) {
    ExpertGemmCase gemm(c, g, 20261205);
    flops += g.flops();
    seconds += median_seconds(c, repeats, [&] { gemm.run(); });
  }
  return flops / seconds;
}

double probe_memory(Compute& c, std::int64_t floats, int repeats) {
  Tensor a = c.alloc(1, floats, DType::f32), b = c.alloc(1, floats, DType::f32);
  c.fill(a.view(), 1.0f);
  return 2.0 * 4.0 * static_cast<double>(floats) /
         median_seconds(c, repeats, [&] { c.copy(a.view(), b.view()); });
}

std::vector<std::uint64_t> parameter_sums(Compute& c, const TrainingStep& step) {
  return {checksum(c, step.params().flat_params(ParamGroup::dense)),
          checksum(c, step.params().flat_params(ParamGroup::expert))};
}

std::vector<std::vector<std::uint64_t>> gather_sums(const MpiRuntime& rt,
                                                    const std::vector<std::uint64_t>& mine) {
  std::vector<double> halves;
  for (std::uint64_t x : mine) {
    halves.push_back(static_cast<double>(x >> 32));
    halves.push_back(static_cast<double>(x & 0xffffffffULL));
  }
  const std::vector<double> all = rt.gather_to_root(halves);
  std::vector<std::vector<std::uint64_t>> out;
  if (rt.rank() != 0) return out;
  for (int r = 0; r < rt.size(); ++r) {
    std::vector<std::uint64_t> sums;
    for (std::size_t k = 0; k < mine.size(); ++k) {
      const std::size_t at = static_cast<std::size_t>(r) * halves.size() + 2 * k;
      sums.push_back((static_cast<std::uint64_t>(all[at]) << 32) |
                     static_cast<std::uint64_t>(all[at + 1]));
    }
    out.push_back(sums);
  }
  return out;
}

}  // namespace moebench
