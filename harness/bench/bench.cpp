#include "harness/bench/bench.hpp"

#include <sstream>

#include "harness/core/error.hpp"

namespace moebench {

int default_bench_ep(const ModelConfig& m) {
  if (m.num_experts_per_tok <= 0 || m.n_routed_experts < m.num_experts_per_tok) return 1;
  std::int64_t ep = m.n_routed_experts / m.num_experts_per_tok;
  while (ep > 1 && m.n_routed_experts % ep != 0) --ep;
  return static_cast<int>(ep);
}

ExpertShare expert_share(const ModelConfig& m, int ep, std::int64_t tokens) {
  const std::int64_t experts = m.n_routed_experts, k = m.num_experts_per_tok;
  if (ep < 1 || experts % ep != 0 || experts / ep < k) {
    std::ostringstream valid;
    bool first = true;
    for (std::int64_t e = 1; e <= experts; ++e) {
      if (experts % e == 0 && experts / e >= k) {
        valid << (first ? "" : ", ") << e;
        first = false;
      }
    }
    throw UsageError("--ep " + std::to_string(ep) + ": must divide the " + std::to_string(experts) +
                     " routed experts and leave at least top-k (" + std::to_string(k) +
                     ") local experts; valid: " + valid.str());
  }
  if (tokens < 1) throw UsageError("--seq-len " + std::to_string(tokens) + ": must be >= 1");
  ExpertShare s;
  s.ep = ep;
  s.local_experts = experts / ep;
  s.tokens = tokens;
  s.rows_per_expert = tokens * k / s.local_experts;
  return s;
}

ModelConfig emulated_rank_model(const ModelConfig& m, int ep) {
  const ExpertShare share = expert_share(m, ep, 1);
  ModelConfig r = m;
  r.name = m.name + " (one EP=" + std::to_string(ep) + " rank)";
  r.n_routed_experts = share.local_experts;
  r.n_group = 1;
  r.topk_group = 1;
  return r;
}

RunConfig bench_run_config(const ModelConfig& m, int ep, std::int64_t seq_len, std::int64_t layers,
                           ComputeBackend backend, Precision precision, int blas_threads,
                           Optimizer optimizer, std::uint64_t seed, int warmup, int steps) {
  expert_share(m, ep, seq_len);  // the flags' errors, in their own words
  RunConfig c;
  c.model = emulated_rank_model(m, ep);
  c.workload.seq_len = seq_len;
  c.workload.micro_batch = 1;
  c.workload.layers = layers;
  c.workload.dense_layers = 0;
  c.workload.attention = true;
  c.workload.routing = RoutingSpec{RoutingMode::balanced, 0.0};
  c.layout.world = 1;
  c.layout.ep = 1;
  c.layout.ranks_per_node = 1;
  c.optimizer = optimizer;
  c.seed = seed;
  c.warmup = warmup;
  c.steps = steps;
  c.backend = backend;
  c.precision = precision;
  c.comm = CommBackend::local;
  c.blas_threads = blas_threads;
  validate(c);
  return c;
}

double GroupedGemmCase::flops() const {
  return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) *
         static_cast<double>(count);
}

std::vector<GroupedGemmCase> expert_gemm_cases(std::int64_t experts, std::int64_t rows,
                                               std::int64_t h, std::int64_t f) {
  // Per expert (moe.cpp): gate_up[r x 2f] = x[r x h] W1[h x 2f]; y[r x h] = act[r x f] W2[f x h];
  // backward: dact = dy W2^T, dW2 = act^T dy, dx = dgate_up W1^T, dW1 = x^T dgate_up.
  return {
      {"forward_up", "forward", false, false, rows, 2 * f, h, experts},
      {"forward_down", "forward", false, false, rows, h, f, experts},
      {"dgrad_down", "dgrad", false, true, rows, f, h, experts},
      {"wgrad_down", "wgrad", true, false, f, h, rows, experts},
      {"dgrad_up", "dgrad", false, true, rows, h, 2 * f, experts},
      {"wgrad_up", "wgrad", true, false, h, 2 * f, rows, experts},
  };
}

double dense_gemm_flops(std::int64_t n) {
  const double d = static_cast<double>(n);
  return 2.0 * d * d * d;
}

std::optional<KnownPeak> known_bf16_peak(const std::string& device_name) {
  auto has = [&](const char* s) { return device_name.find(s) != std::string::npos; };
  // Dense (not 2:4 sparse) BF16 tensor-core rates. Hopper from NVIDIA's H100/H200 datasheets: the
  // SXM parts 989.4, the NVL parts 835, H100 PCIe 756. Blackwell from NVIDIA's DGX Cloud
  // benchmarking README (other sources differ by a few percent: the report names this one).
  // GB before B: "NVIDIA GB200" contains "B200".
  const std::string hopper = "NVIDIA H100/H200 datasheet, dense BF16, " + device_name;
  const std::string blackwell =
      "NVIDIA DGX Cloud benchmarking README (peak dense BF16), " + device_name;
  if (has("GB300")) return KnownPeak{2450.0, blackwell};
  if (has("GB200")) return KnownPeak{2450.0, blackwell};
  if (has("B300")) return KnownPeak{2250.0, blackwell};
  if (has("B200")) return KnownPeak{2250.0, blackwell};
  if (!(has("H100") || has("H200") || has("H800"))) return std::nullopt;
  if (has("NVL")) return KnownPeak{835.0, hopper};
  if (has("PCIe")) return KnownPeak{756.0, hopper};
  return KnownPeak{989.0, hopper};
}

std::vector<std::int64_t> parse_layer_list(const std::string& text) {
  std::vector<std::int64_t> out;
  std::stringstream in(text);
  std::string item;
  auto bad = [&] {
    return UsageError(
        "--layers " + text +
        ": expected a comma-separated increasing list of layer counts >= 1, e.g. 1,4");
  };
  while (std::getline(in, item, ',')) {
    std::size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      throw bad();
    }
    if (used != item.size() || v < 1 || (!out.empty() && v <= out.back())) throw bad();
    out.push_back(v);
  }
  if (out.empty() || text.empty() || text.back() == ',') throw bad();
  return out;
}

}  // namespace moebench
