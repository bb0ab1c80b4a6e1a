// Shared by the layer and step tests: a DeepSeek-V3-shaped model small enough that a forward pass
// takes microseconds, a one-process LayerContext on the cpu backend and the mpi communicator over
// MPI_COMM_SELF, host transfers, and a central finite-difference checker.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "harness/backends/mpi/mpi_communicator.hpp"
#include "harness/backends/registry/registry.hpp"
#include "harness/comm/communicator.hpp"
#include "harness/compute/compute.hpp"
#include "harness/math/random.hpp"
#include "harness/measure/phase_timer.hpp"
#include "harness/runtime/mpi_runtime.hpp"
#include "workloads/layers/layer_context.hpp"
#include "workloads/params/parameters.hpp"

namespace moebench::layer_test {

using Vec = std::vector<float>;

// Every width is distinct where the code could confuse two of them (hidden 16, q_lora 8,
// kv_lora 6, qk_head 6, v 4, moe_ffn 8, ffn 12), so a swapped dimension fails a shape check.
inline ModelConfig tiny_model() {
  ModelConfig m;
  m.name = "fd-tiny";
  m.hidden_size = 16;
  m.num_hidden_layers = 2;
  m.first_k_dense_replace = 1;
  m.intermediate_size = 12;
  m.moe_intermediate_size = 8;
  m.n_routed_experts = 8;
  m.n_shared_experts = 1;
  m.num_experts_per_tok = 2;
  m.n_group = 4;
  m.topk_group = 2;
  m.routed_scaling_factor = 2.5;
  m.q_lora_rank = 8;
  m.kv_lora_rank = 6;
  m.qk_nope_head_dim = 4;
  m.qk_rope_head_dim = 2;
  m.v_head_dim = 4;
  m.num_attention_heads = 2;
  m.vocab_size = 32;
  m.rms_norm_eps = 1e-6;
  m.rope_theta = 10000.0;
  return m;
}

inline RunConfig tiny_run(int layers, int dense_layers,
                          RoutingSpec routing = {RoutingMode::balanced, 0.0}) {
  RunConfig c;
  c.model = tiny_model();
  c.workload.seq_len = 6;
  c.workload.micro_batch = 2;
  c.workload.layers = layers;
  c.workload.dense_layers = dense_layers;
  c.workload.routing = routing;
  c.optimizer = Optimizer::none;
  c.seed = 77;
  c.verify = true;  // TrainingStep keeps its outputs and input gradients for the checks
  return c;
}

inline Topology one_rank() {
  return single_process_topology();
}

// Rank `rank` of a world of `world` ranks on one node, with EP `ep` and `pp` pipeline stages.
inline Topology rank_of(int world, int rank, int ep, int pp = 1) {
  return make_topology(ParallelGrid(world, GridShape{1, 1, ep, pp}), rank, 0, 1, rank, world);
}

// Everything a layer needs, for one process. Weights are initialised from the config's seed.
struct Harness {
  explicit Harness(const RunConfig& c)
      : config(c),
        topo(one_rank()),
        compute(make_compute(ComputeBackend::cpu, 0, 1)),
        comm(make_mpi_communicator(MPI_COMM_SELF, topo)),
        timer(*compute),
        params(*compute, config, topo),
        scratch(*compute),
        ctx{*compute, *comm, timer, sample, config, topo, params, scratch} {
    validate(config);
    if (config.precision == Precision::fp8) {
      compute->set_linear_precision(LinearPrecision::fp8);
      compute->set_fp8_recipe(config.fp8_recipe);
    }
    ctx.tokens = config.workload.tokens_per_rank();
    params.initialize(config.seed);
  }
  Harness(const Harness&) = delete;
  Harness& operator=(const Harness&) = delete;

  std::int64_t tokens() const { return ctx.tokens; }
  std::int64_t hidden() const { return config.model.hidden_size; }

  // Uniform in [-scale, scale): O(1) inputs keep the finite differences well conditioned.
  Tensor random(std::int64_t rows, std::int64_t cols, std::uint64_t stream, float scale = 1.0f) {
    Tensor t = compute->alloc(rows, cols);
    compute->fill_random(t, 4242, stream, scale);
    return t;
  }
  Tensor filled(std::int64_t rows, std::int64_t cols, float value) {
    Tensor t = compute->alloc(rows, cols);
    compute->fill(t, value);
    return t;
  }
  Vec read(Mat m) {
    Vec v(static_cast<std::size_t>(m.numel()));
    if (!v.empty()) compute->download(m, v.data());
    return v;
  }
  void write(Mat m, const Vec& v) {
    REQUIRE(static_cast<std::int64_t>(v.size()) == m.numel());
    compute->upload(v.data(), m);
  }

  RunConfig config;
  Topology topo;
  std::unique_ptr<Compute> compute;
  std::unique_ptr<Communicator> comm;
  PhaseTimer timer;
  StepSample sample;
  ParamStore params;
  Scratch scratch;
  LayerContext ctx;
};

inline double dot(const Vec& a, const Vec& b) {
  REQUIRE(a.size() == b.size());
  double s = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

inline float max_abs_of(const Vec& v) {
  float m = 0.0f;
  for (float x : v) m = std::max(m, std::abs(x));
  return m;
}

// Central differences in FP32, h = 1e-2, on O(1) inputs and weights (~1/sqrt(fan-in)); the loss
// sum(G .* out) is accumulated in double. The truncation error (h^2/6 x a third derivative) and
// the FP32 rounding of the forward (~1e-7 x sqrt(terms) x |out| / h) stay below ~3e-4 of a
// tensor's gradient scale (measured: at most 2.5e-4 over every tensor checked here), while a
// wrong gradient (a missing term, a transposed weight, a wrong scale or sign) is off by a fraction
// of that scale or of the element itself. An element passes when
//   |fd - analytic| <= 1e-5 + 3e-3 x scale + 1e-2 x |analytic|,
// scale = max |fd| over the checked elements of the tensor (the ground truth's scale, so a huge
// wrong analytic value cannot loosen its own bound), i.e. >= 10x the measured error.
constexpr float kFdStep = 1e-2f;
constexpr double kFdAtol = 1e-5;
constexpr double kFdScaleTol = 3e-3;
constexpr double kFdRtol = 1e-2;

// Coordinates to check: all of a small tensor, else `count` spread pseudo-randomly over it.
inline std::vector<std::int64_t> sample_indices(std::int64_t n, int count, std::uint64_t salt) {
  std::vector<std::int64_t> out;
  if (n <= count) {
    for (std::int64_t i = 0; i < n; ++i) out.push_back(i);
    return out;
  }
  for (int k = 0; k < count; ++k) {
    out.push_back(
        static_cast<std::int64_t>(mix64(salt * 1000003ULL + k) % static_cast<std::uint64_t>(n)));
  }
  return out;
}

struct FdStats {
  int checked = 0;
  int skipped = 0;   // where `valid` said the perturbation changed a discrete choice
  double scale = 0;  // max |fd|
  double max_err = 0;
};

// Checks sampled elements of the contiguous `x` against `analytic` (its gradient, same layout):
// loss() is re-evaluated at x +- h per element. When `valid` is given and returns false after
// either evaluation, the coordinate is skipped (a routing decision flipped: the loss is only
// piecewise smooth there). Requires that the loss depends on x (some |fd| > 1e-3), so a gradient
// that is zero where it should not be, or a tensor that is never read, cannot pass vacuously.
inline FdStats check_fd(Harness& hx, const std::string& name, Mat x, const Vec& analytic,
                        const std::function<double()>& loss, int samples = 24,
                        const std::function<bool()>& valid = {}) {
  INFO("tensor " << name);
  REQUIRE(x.contiguous());
  REQUIRE(static_cast<std::int64_t>(analytic.size()) == x.numel());
  FdStats st;
  Vec xv = hx.read(x);
  std::uint64_t salt = 0;
  for (char ch : name) salt = salt * 131 + static_cast<unsigned char>(ch);
  std::vector<std::pair<std::int64_t, double>> fds;
  for (std::int64_t i : sample_indices(x.numel(), samples, salt)) {
    const float x0 = xv[static_cast<std::size_t>(i)];
    Mat elem = x.reshaped(x.numel(), 1).row_slice(i, 1);
    const float up = x0 + kFdStep, down = x0 - kFdStep;
    hx.compute->upload(&up, elem);
    const double lp = loss();
    bool ok = !valid || valid();
    hx.compute->upload(&down, elem);
    const double lm = loss();
    ok = ok && (!valid || valid());
    hx.compute->upload(&x0, elem);
    if (!ok) {
      ++st.skipped;
      continue;
    }
    // Divide by the step actually taken (x0 +- h rounded to FP32).
    const double fd = (lp - lm) / (static_cast<double>(up) - static_cast<double>(down));
    fds.emplace_back(i, fd);
    st.scale = std::max(st.scale, std::abs(fd));
  }
  // Leave the layer's saved state consistent with the restored tensor.
  loss();
  for (const auto& [i, fd] : fds) {
    const double a = analytic[static_cast<std::size_t>(i)];
    const double err = std::abs(fd - a);
    CAPTURE(i);
    CAPTURE(a);
    CAPTURE(fd);
    CHECK(err <= kFdAtol + kFdScaleTol * st.scale + kFdRtol * std::abs(a));
    st.max_err = std::max(st.max_err, err);
    ++st.checked;
  }
  if (st.checked > 0) CHECK(st.scale > 1e-3);
  return st;
}

}  // namespace moebench::layer_test
