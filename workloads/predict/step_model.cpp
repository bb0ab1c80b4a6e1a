#include "workloads/predict/step_model.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <tuple>

#include "harness/core/error.hpp"

namespace moebench {

double compute_time_s(double flops, double peak_flops_per_s, double efficiency) {
  if (!(efficiency > 0 && efficiency <= 1)) {
    throw UsageError("an efficiency must be in (0, 1], got " + std::to_string(efficiency));
  }
  if (!(peak_flops_per_s > 0)) throw UsageError("a peak FLOP/s must be > 0");
  return flops / (peak_flops_per_s * efficiency);
}

double transfer_time_s(const LinkCost& link, double bytes) {
  MB_CHECK(link.bandwidth_bytes_per_s > 0, "a link's bandwidth must be > 0");
  return link.latency_s + bytes / link.bandwidth_bytes_per_s;
}

namespace {

// An exchange's two parts run at once on different links, each one latency per peer plus its
// bytes over the link's bandwidth: the slower sets the time.
double two_link_time_s(const AllToAllCost& c, double peers_in, double peers_out,
                       const LinkCost& nvlink, const LinkCost& scale_out) {
  const double t_in =
      peers_in > 0 ? peers_in * nvlink.latency_s + c.in_domain_bytes / nvlink.bandwidth_bytes_per_s
                   : 0.0;
  const double t_out = peers_out > 0 ? peers_out * scale_out.latency_s +
                                           c.cross_domain_bytes / scale_out.bandwidth_bytes_per_s
                                     : 0.0;
  return std::max(t_in, t_out);
}

}  // namespace

AllToAllCost alltoall_cost(double bytes_per_rank, int group, int domain, const LinkCost& nvlink,
                           const LinkCost& scale_out) {
  MB_CHECK(group >= 1 && domain >= 1, "group " << group << ", domain " << domain);
  AllToAllCost c;
  if (group == 1) return c;
  // The peers of a rank of the group inside its domain: the group's ranks that share it.
  const int per_domain = std::min(group, domain);
  const int inside = per_domain - 1;
  const int outside = group - per_domain;
  const double share = bytes_per_rank / group;
  c.in_domain_bytes = share * inside;
  c.cross_domain_bytes = share * outside;
  c.time_s = two_link_time_s(c, inside, outside, nvlink, scale_out);
  return c;
}

AllToAllCost dedup_alltoall_cost(double tokens, int k, double row_bytes, int group, int domain,
                                 const LinkCost& nvlink, const LinkCost& scale_out) {
  MB_CHECK(group >= 1 && domain >= 1 && k >= 1, "group " << group << ", domain " << domain);
  AllToAllCost c;
  if (group == 1) return c;
  const int per_domain = std::min(group, domain);
  const double domains = static_cast<double>(group) / per_domain;
  const double q = 1.0 - std::pow(1.0 - 1.0 / group, k);
  const double own_peers = (per_domain - 1) * q;         // distinct ranks hit in its domain
  const double remote_ranks = (group - per_domain) * q;  // distinct ranks hit elsewhere
  const double remote_domains =
      domains > 1 ? (domains - 1) * (1.0 - std::pow(1.0 - 1.0 / domains, k)) : 0.0;
  // NVLink: its own domain's ranks, and forwarding what lands on it for its domain's others.
  c.in_domain_bytes =
      tokens * row_bytes * (own_peers + std::max(0.0, remote_ranks - remote_domains));
  c.cross_domain_bytes = tokens * row_bytes * remote_domains;
  c.time_s = two_link_time_s(c, per_domain - 1, domains - 1, nvlink, scale_out);
  return c;
}

double ring_half_time_s(double bytes, int n, const LinkCost& link) {
  if (n <= 1) return 0;
  return (n - 1) * transfer_time_s(link, bytes / n);
}

double ring_allreduce_time_s(double bytes, int n, const LinkCost& link) {
  return 2.0 * ring_half_time_s(bytes, n, link);
}

double overlapped_exchange_s(double exchange_s, double compute_s, double comm_sm_fraction) {
  if (!(comm_sm_fraction >= 0 && comm_sm_fraction < 1)) {
    throw UsageError("the exchanges' share of the SMs must be in [0, 1), got " +
                     std::to_string(comm_sm_fraction));
  }
  return std::max({0.0, exchange_s - compute_s, exchange_s * comm_sm_fraction});
}

SimulatedPipeline simulate_pipeline(const PipelineShape& shape, const PipelineTimes& times) {
  validate(shape);
  const std::size_t stages = static_cast<std::size_t>(shape.pp * shape.vp);
  MB_CHECK(times.forward_s.size() == stages && times.backward_s.size() == stages,
           "per-stage times for " << stages << " stages");
  std::vector<std::vector<PipelineOp>> ops(static_cast<std::size_t>(shape.pp));
  for (int r = 0; r < shape.pp; ++r) ops[static_cast<std::size_t>(r)] = pipeline_schedule(shape, r);
  // When each transfer arrives, by (activation, micro-batch, from, to).
  std::map<std::tuple<bool, int, int, int>, double> arrival;
  const auto key = [](const PipelineTransfer& t) {
    return std::make_tuple(t.activation, t.microbatch, t.from, t.to);
  };
  SimulatedPipeline out;
  out.busy_s.assign(static_cast<std::size_t>(shape.pp), 0.0);
  out.end_s.assign(static_cast<std::size_t>(shape.pp), 0.0);
  out.pass_start_s.resize(static_cast<std::size_t>(shape.pp));
  out.pass_end_s.resize(static_cast<std::size_t>(shape.pp));
  std::vector<std::size_t> next(static_cast<std::size_t>(shape.pp), 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int r = 0; r < shape.pp; ++r) {
      const std::size_t ri = static_cast<std::size_t>(r);
      while (next[ri] < ops[ri].size()) {
        const PipelineOp& op = ops[ri][next[ri]];
        const PassTransfers io = pass_transfers(shape, r, op);
        double ready = out.end_s[ri];
        bool have = true;
        for (const PipelineTransfer& t : io.recv) {
          const auto it = arrival.find(key(t));
          if (it == arrival.end()) {
            have = false;
            break;
          }
          ready = std::max(ready, it->second);
        }
        if (!have) break;
        const std::size_t stage = static_cast<std::size_t>(op.chunk * shape.pp + r);
        const double t = op.forward ? times.forward_s[stage] : times.backward_s[stage];
        out.end_s[ri] = ready + t;
        out.busy_s[ri] += t;
        out.pass_start_s[ri].push_back(ready);
        out.pass_end_s[ri].push_back(out.end_s[ri]);
        for (const PipelineTransfer& s : io.send) arrival[key(s)] = out.end_s[ri] + times.p2p_s;
        ++next[ri];
        progress = true;
      }
    }
  }
  for (int r = 0; r < shape.pp; ++r) {
    MB_CHECK(next[static_cast<std::size_t>(r)] == ops[static_cast<std::size_t>(r)].size(),
             "the schedule stalled on pipeline rank " << r);
  }
  out.step_s = *std::max_element(out.end_s.begin(), out.end_s.end());
  return out;
}

DataParallelExposure exposed_data_parallel(const PipelineShape& shape, const SimulatedPipeline& sim,
                                           int pp_rank, const std::vector<double>& reduce_s,
                                           const std::vector<double>& gather_s) {
  const std::size_t chunks = static_cast<std::size_t>(shape.vp);
  MB_CHECK(reduce_s.size() == chunks && gather_s.size() == chunks,
           "per-chunk exchange times for " << chunks << " chunks");
  const std::size_t ri = static_cast<std::size_t>(pp_rank);
  MB_CHECK(ri < sim.pass_start_s.size(), "no simulated passes for pipeline rank " << pp_rank);
  const std::vector<PipelineOp> ops = pipeline_schedule(shape, pp_rank);
  MB_CHECK(sim.pass_start_s[ri].size() == ops.size(), "simulated passes of another schedule");
  // Each chunk's first forward's end and last backward's start, and the order the rank reaches
  // them in.
  std::vector<double> first_forward_end(chunks, -1), last_backward_start(chunks, 0);
  std::vector<std::size_t> last_backward(chunks, 0);
  std::vector<std::size_t> gather_order;                          // chunks
  std::vector<std::pair<std::size_t, std::size_t>> reduce_order;  // (last backward's pass, chunk)
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const std::size_t c = static_cast<std::size_t>(ops[i].chunk);
    if (ops[i].forward && first_forward_end[c] < 0) {
      first_forward_end[c] = sim.pass_end_s[ri][i];
      gather_order.push_back(c);
    }
    if (!ops[i].forward) {
      last_backward[c] = i;
      last_backward_start[c] = sim.pass_start_s[ri][i];
    }
  }
  for (std::size_t c = 0; c < chunks; ++c) reduce_order.emplace_back(last_backward[c], c);
  std::sort(reduce_order.begin(), reduce_order.end());
  DataParallelExposure out;
  // The all-gathers: a chunk's first forward waits until its own has ended, and every later pass
  // with it.
  double channel = 0;
  for (const std::size_t c : gather_order) {
    channel += gather_s[c];
    out.gather_s = std::max(out.gather_s, channel - first_forward_end[c]);
  }
  // The reductions: each from its chunk's last backward's start or the previous one's end.
  channel = -std::numeric_limits<double>::infinity();
  for (const auto& [pass, c] : reduce_order) {
    channel = std::max(channel, last_backward_start[c]) + reduce_s[c];
  }
  if (!reduce_order.empty()) out.reduce_s = std::max(0.0, channel - sim.end_s[ri]);
  return out;
}

}  // namespace moebench
