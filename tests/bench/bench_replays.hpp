// The two replays tests/bench/bench_phases.cpp measures the phases against: the experts' GEMMs
// issued straight to cblas_sgemm with the same SwiGLU as plain loops, and the dispatch as bare
// MPI_Alltoallv of the same rows (bench_phases.cpp says how they are compared).
#pragma once

#include <cblas.h>
#include <mpi.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "harness/backends/cpu/cpu_compute.hpp"
#include "harness/backends/mpi/mpi_check.hpp"
#include "harness/backends/mpi/mpi_communicator.hpp"
#include "harness/comm/communicator.hpp"
#include "harness/core/error.hpp"
#include "harness/math/elementwise.hpp"
#include "harness/math/route.hpp"
#include "harness/measure/stats.hpp"
#include "harness/runtime/mpi_runtime.hpp"
#include "workloads/layers/moe.hpp"
#include "workloads/step/training_step.hpp"

namespace moebench::bench_replay {

using Clock = std::chrono::steady_clock;
inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

struct Routing {
  DispatchPlan plan;
  ExpertLayout layout;
};

inline Routing recompute_routing(const RunConfig& c, const Topology& topo, MPI_Comm expert_comm,
                                 int local_experts) {
  const RouterParams rp = router_params(c);
  const std::int64_t n = c.workload.tokens_per_rank();
  const std::vector<float> scores(static_cast<std::size_t>(rp.experts), 0.5f);
  std::vector<std::int32_t> idx(static_cast<std::size_t>(n * rp.top_k));
  std::vector<float> weights(static_cast<std::size_t>(rp.top_k));
  // As the step's: the tokens of this rank's place in the data-parallel group.
  const std::int64_t first_token = static_cast<std::int64_t>(topo.group(Group::data).rank) * n;
  for (std::int64_t t = 0; t < n; ++t) {
    route_token(rp, scores.data(), nullptr, static_cast<std::uint64_t>(first_token + t),
                idx.data() + t * rp.top_k, weights.data());
  }
  Routing r;
  r.plan = make_dispatch_plan(idx, n, rp.top_k, rp.experts, topo.grid.ep());
  std::vector<std::int64_t> recv(r.plan.send_expert_rows.size());
  check_mpi(MPI_Alltoall(r.plan.send_expert_rows.data(), local_experts, MPI_INT64_T, recv.data(),
                         local_experts, MPI_INT64_T, expert_comm),
            "MPI_Alltoall");
  r.layout = make_expert_layout(recv, topo.grid.ep(), local_experts);
  return r;
}

inline void sgemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, const float* a,
                  std::int64_t lda, const float* b, std::int64_t ldb, float* c, std::int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), 1.0f, a,
              static_cast<int>(lda), b, static_cast<int>(ldb), 0.0f, c, static_cast<int>(ldc));
}

struct ExpertsTimes {
  double gemm_s = 0;
  double swiglu_s = 0;
};

// The experts phase's GEMMs, same shapes, transposes, order and buffer sizes, one set of
// buffers per MoE layer as the MoE blocks hold them, straight to CBLAS.
class ExpertsReplay {
 public:
  ExpertsReplay(Compute& compute, const RunConfig& c, const ExpertLayout& layout)
      : layout_(layout), h_(c.model.hidden_size), f_(c.model.moe_intermediate_size) {
    const std::int64_t r = layout.total_rows, h = h_, f = f_;
    const float w_scale = 1.0f / std::sqrt(static_cast<float>(h));
    std::uint64_t stream = 1;
    auto make = [&](std::int64_t rows, std::int64_t cols, float scale) {
      Tensor t = compute.alloc(rows, cols);
      compute.fill_random(t, c.seed, stream++, scale);  // touched, and free of denormals
      return t;
    };
    for (std::int64_t l = 0; l < c.workload.moe_layers(); ++l) {
      Layer L;
      L.xe = make(r, h, 1.0f);
      L.gate_up = make(r, 2 * f, 1.0f);
      L.act = make(r, f, 1.0f);
      L.ye = make(r, h, 1.0f);
      L.dye = make(r, h, 1.0f);
      L.dact = make(r, f, 1.0f);
      L.dgate_up = make(r, 2 * f, 1.0f);
      L.dxe = make(r, h, 1.0f);
      for (std::size_t e = 0; e < layout.expert_rows.size(); ++e) {
        L.w_up.push_back(make(h, 2 * f, w_scale));
        L.w_down.push_back(make(f, h, w_scale));
        L.g_up.push_back(make(h, 2 * f, 0.0f));
        L.g_down.push_back(make(f, h, 0.0f));
        // 2 FLOP per multiply-add: up, down forward; two dgrads and two wgrads backward.
        flops_ +=
            2.0 * static_cast<double>(layout.expert_rows[e]) * h * f * (2 + 1 + 1 + 1 + 2 + 2);
      }
      layers_.push_back(std::move(L));
    }
  }

  double flops() const { return flops_; }

  // Forward through every layer, then backward in reverse, as the step orders them.
  ExpertsTimes run() {
    ExpertsTimes t;
    for (Layer& l : layers_) forward(l, t);
    for (auto it = layers_.rbegin(); it != layers_.rend(); ++it) backward(*it, t);
    return t;
  }
  void forward(std::size_t layer, ExpertsTimes& t) { forward(layers_[layer], t); }
  void backward(std::size_t layer, ExpertsTimes& t) { backward(layers_[layer], t); }
  std::size_t layers() const { return layers_.size(); }

 private:
  struct Layer {
    Tensor xe, gate_up, act, ye, dye, dact, dgate_up, dxe;
    std::vector<Tensor> w_up, w_down, g_up, g_down;
  };

  // Calls g(expert, rows, first row) for every local expert that received rows.
  template <typename G>
  void each_expert(G&& g) const {
    for (std::size_t e = 0; e < layout_.expert_rows.size(); ++e) {
      if (layout_.expert_rows[e] > 0) g(e, layout_.expert_rows[e], layout_.expert_offsets[e]);
    }
  }

  void forward(Layer& L, ExpertsTimes& t) {
    const std::int64_t h = h_, f = f_, r = layout_.total_rows;
    float *xe = L.xe.view().as<float>(), *gu = L.gate_up.view().as<float>(),
          *act = L.act.view().as<float>();
    float* ye = L.ye.view().as<float>();
    auto t0 = Clock::now();
    each_expert([&](std::size_t e, std::int64_t m, std::int64_t o) {
      sgemm(false, false, m, 2 * f, h, xe + o * h, h, L.w_up[e].view().as<float>(), 2 * f,
            gu + o * 2 * f, 2 * f);
    });
    t.gemm_s += seconds_since(t0);
    t0 = Clock::now();
    for (std::int64_t i = 0; i < r; ++i) {
      const float* g = gu + i * 2 * f;
      float* a = act + i * f;
      for (std::int64_t j = 0; j < f; ++j) a[j] = swiglu_forward(g[j], g[f + j]);
    }
    t.swiglu_s += seconds_since(t0);
    t0 = Clock::now();
    each_expert([&](std::size_t e, std::int64_t m, std::int64_t o) {
      sgemm(false, false, m, h, f, act + o * f, f, L.w_down[e].view().as<float>(), h, ye + o * h,
            h);
    });
    t.gemm_s += seconds_since(t0);
  }

  void backward(Layer& L, ExpertsTimes& t) {
    const std::int64_t h = h_, f = f_, r = layout_.total_rows;
    float *xe = L.xe.view().as<float>(), *gu = L.gate_up.view().as<float>(),
          *act = L.act.view().as<float>();
    float *dye = L.dye.view().as<float>(), *dact = L.dact.view().as<float>();
    float *dgu = L.dgate_up.view().as<float>(), *dxe = L.dxe.view().as<float>();
    auto t0 = Clock::now();
    each_expert([&](std::size_t e, std::int64_t m, std::int64_t o) {
      sgemm(false, true, m, f, h, dye + o * h, h, L.w_down[e].view().as<float>(), h, dact + o * f,
            f);
    });
    each_expert([&](std::size_t e, std::int64_t m, std::int64_t o) {
      sgemm(true, false, f, h, m, act + o * f, f, dye + o * h, h, L.g_down[e].view().as<float>(),
            h);
    });
    t.gemm_s += seconds_since(t0);
    t0 = Clock::now();
    for (std::int64_t i = 0; i < r; ++i) {
      const float* g = gu + i * 2 * f;
      const float* d = dact + i * f;
      float* dg = dgu + i * 2 * f;
      for (std::int64_t j = 0; j < f; ++j)
        swiglu_backward(g[j], g[f + j], d[j], dg + j, dg + f + j);
    }
    t.swiglu_s += seconds_since(t0);
    t0 = Clock::now();
    each_expert([&](std::size_t e, std::int64_t m, std::int64_t o) {
      sgemm(false, true, m, h, 2 * f, dgu + o * 2 * f, 2 * f, L.w_up[e].view().as<float>(), 2 * f,
            dxe + o * h, h);
    });
    each_expert([&](std::size_t e, std::int64_t m, std::int64_t o) {
      sgemm(true, false, h, 2 * f, m, xe + o * h, h, dgu + o * 2 * f, 2 * f,
            L.g_up[e].view().as<float>(), 2 * f);
    });
    t.gemm_s += seconds_since(t0);
  }

  const ExpertLayout& layout_;
  std::int64_t h_, f_;
  std::vector<Layer> layers_;
  double flops_ = 0;
};

struct DispatchTimes {
  double counts_s = 0;     // the counts' MPI_Alltoall
  double alltoallv_s = 0;  // the rows' MPI_Alltoallv, both directions
};

// The dispatch phase's collectives on buffers of the same sizes, one set per MoE layer: the
// counts exchange and the tokens' all-to-all in forward, its reverse in backward. Each call starts
// after a barrier, so no rank's lateness lands in another's time.
class DispatchReplay {
 public:
  DispatchReplay(MPI_Comm comm, const Routing& r, int local_experts, std::int64_t h,
                 std::int64_t layers)
      : comm_(comm), routing_(r), local_experts_(local_experts) {
    // Rows travel as one contiguous type per row, as the mpi communicator sends them.
    check_mpi(MPI_Type_contiguous(static_cast<int>(h), MPI_FLOAT, &row_), "MPI_Type_contiguous");
    check_mpi(MPI_Type_commit(&row_), "MPI_Type_commit");
    auto ints = [](const std::vector<std::int64_t>& v) {
      std::vector<int> out;
      for (std::int64_t x : v) out.push_back(static_cast<int>(x));
      return out;
    };
    send_rows_ = ints(r.plan.send_rows);
    send_offsets_ = ints(r.plan.send_offsets);
    recv_rows_ = ints(r.layout.recv_rows);
    recv_offsets_ = ints(r.layout.recv_offsets);
    const auto sent = static_cast<std::size_t>(r.plan.row_token.size() * h);
    const auto received = static_cast<std::size_t>(r.layout.total_rows * h);
    for (std::int64_t l = 0; l < layers; ++l) {
      layers_.push_back({std::vector<float>(sent, 1.0f), std::vector<float>(received, 0.0f),
                         std::vector<float>(received, 1.0f), std::vector<float>(sent, 0.0f)});
    }
    // What the phase counts: the send buffer of each call, forward and backward.
    bytes_ = static_cast<double>(layers) * static_cast<double>(sent + received) * sizeof(float);
    recv_counts_.resize(r.plan.send_expert_rows.size());
  }
  ~DispatchReplay() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Type_free(&row_);
  }
  DispatchReplay(const DispatchReplay&) = delete;
  DispatchReplay& operator=(const DispatchReplay&) = delete;

  double bytes() const { return bytes_; }

  DispatchTimes run() {
    DispatchTimes t;
    for (std::size_t l = 0; l < layers_.size(); ++l) forward(l, true, t);
    for (std::size_t l = layers_.size(); l-- > 0;) backward(l, true, t);
    return t;
  }

  // One layer's forward calls (counts, then tokens out) and backward call (gradients back);
  // `barrier`: start each call after a barrier.
  void forward(std::size_t layer, bool barrier, DispatchTimes& t) {
    t.counts_s += timed(barrier, [&] {
      check_mpi(MPI_Alltoall(routing_.plan.send_expert_rows.data(), local_experts_, MPI_INT64_T,
                             recv_counts_.data(), local_experts_, MPI_INT64_T, comm_),
                "MPI_Alltoall");
    });
    // The step writes the rows just before sending them (the permutation's gather), so they
    // are sent from cache there too.
    std::fill(layers_[layer].tokens_out.begin(), layers_[layer].tokens_out.end(), 1.0f);
    t.alltoallv_s += timed(barrier, [&] { exchange(layer, true); });
  }
  void backward(std::size_t layer, bool barrier, DispatchTimes& t) {
    std::fill(layers_[layer].experts_out.begin(), layers_[layer].experts_out.end(), 1.0f);
    t.alltoallv_s += timed(barrier, [&] { exchange(layer, false); });
  }

  // One untimed all-to-all of a layer's rows, to the experts' ranks or back (the combine's
  // shape is the reverse dispatch's).
  void exchange(std::size_t layer, bool to_experts) {
    Buffers& b = layers_[layer];
    if (to_experts) {
      check_mpi(
          MPI_Alltoallv(b.tokens_out.data(), send_rows_.data(), send_offsets_.data(), row_,
                        b.experts_in.data(), recv_rows_.data(), recv_offsets_.data(), row_, comm_),
          "MPI_Alltoallv");
    } else {
      check_mpi(
          MPI_Alltoallv(b.experts_out.data(), recv_rows_.data(), recv_offsets_.data(), row_,
                        b.tokens_in.data(), send_rows_.data(), send_offsets_.data(), row_, comm_),
          "MPI_Alltoallv");
    }
  }

 private:
  struct Buffers {
    std::vector<float> tokens_out, experts_in, experts_out, tokens_in;
  };

  template <typename F>
  double timed(bool barrier, F&& call) {
    if (barrier) check_mpi(MPI_Barrier(comm_), "MPI_Barrier");
    const auto t0 = Clock::now();
    call();
    return seconds_since(t0);
  }

  MPI_Comm comm_;
  const Routing& routing_;
  int local_experts_;
  MPI_Datatype row_ = MPI_DATATYPE_NULL;
  std::vector<int> send_rows_, send_offsets_, recv_rows_, recv_offsets_;
  std::vector<std::int64_t> recv_counts_;
  std::vector<Buffers> layers_;
  double bytes_ = 0;
};

// The dispatch as the step meets it: amid the experts' compute, with the combine's all-to-alls
// (untimed) where the step has them, and without barriers, so each call also holds the wait for
// peers still computing. It has none of the library's code, so against the phase it tells the
// library's overhead apart from what the context adds to both (arrival skew, scheduling).

}  // namespace moebench::bench_replay
