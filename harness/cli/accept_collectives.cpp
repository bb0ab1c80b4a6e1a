#include "harness/cli/accept_collectives.hpp"

#include <algorithm>
#include <map>

#include "harness/core/clock.hpp"
#include "harness/core/human.hpp"

namespace moebench {

namespace {

constexpr const char* kOps[] = {"all_reduce", "reduce_scatter", "all_gather", "all_to_all"};
constexpr std::int64_t kCols = 256;  // floats a row

}  // namespace

double bus_factor(const std::string& op, int n) {
  const double k = static_cast<double>(n - 1) / static_cast<double>(n);
  return op == "all_reduce" ? 2 * k : k;
}

std::vector<CollectiveRow> measure_collectives(Communicator& comm, Compute& compute,
                                               const MpiRuntime& rt,
                                               const std::vector<std::int64_t>& sizes, int iters) {
  const int n = rt.size();
  std::vector<CollectiveRow> rows;
  for (const std::string op : kOps) {  // as nccl-tests lists them: an op's sizes together
    for (const std::int64_t size : sizes) {
      const std::int64_t per_rank = std::max<std::int64_t>(1, size / (4 * kCols * n));
      const std::int64_t total = per_rank * n;  // rows of the whole buffer
      Tensor buf = compute.alloc(total, kCols, DType::f32);
      Tensor other = compute.alloc(total, kCols, DType::f32);
      Tensor shard = compute.alloc(per_rank, kCols, DType::f32);
      compute.fill(buf.view(), 1.0f);
      compute.fill(shard.view(), 1.0f);
      const std::vector<std::int64_t> counts(static_cast<std::size_t>(n), per_rank);
      std::vector<std::int64_t> offsets(static_cast<std::size_t>(n));
      for (int r = 0; r < n; ++r) offsets[static_cast<std::size_t>(r)] = r * per_rank;
      const auto once = [&] {
        if (op == "all_reduce") {
          compute.fill(buf.view(), 1.0f);  // keep the sums finite
          comm.allreduce_sum(Group::world, buf.view());
        } else if (op == "reduce_scatter") {
          comm.reduce_scatter_sum(Group::world, buf.view(), shard.view());
        } else if (op == "all_gather") {
          comm.allgather(Group::world, shard.view(), buf.view());
        } else {
          comm.alltoallv(Group::world, buf.view(), counts, offsets, other.view(), counts, offsets);
        }
      };
      once();  // untimed: buffers registered, connections made
      comm.synchronize();
      comm.barrier(Group::world);
      const Clock::time_point t0 = Clock::now();
      for (int i = 0; i < iters; ++i) once();
      comm.synchronize();
      const double mine = seconds_since(t0) / iters;
      CollectiveRow row;
      row.op = op;
      row.bytes = total * kCols * 4;
      row.time_s = rt.allreduce_max(mine);
      row.algbw = static_cast<double>(row.bytes) / std::max(1e-12, row.time_s);
      row.busbw = row.algbw * bus_factor(op, n);
      rows.push_back(row);
    }
  }
  return rows;
}

std::vector<std::string> collectives_table(const std::vector<CollectiveRow>& rows) {
  std::vector<std::string> out = {strprintf("%-15s %12s %12s %12s %12s", "collective", "size (B)",
                                            "time (us)", "algbw (GB/s)", "busbw (GB/s)")};
  for (const CollectiveRow& r : rows) {
    out.push_back(strprintf("%-15s %12lld %12.1f %12.2f %12.2f", r.op.c_str(),
                            static_cast<long long>(r.bytes), r.time_s * 1e6, r.algbw / 1e9,
                            r.busbw / 1e9));
  }
  return out;
}

std::vector<AcceptCheck> judge_collectives(const std::vector<CollectiveRow>& rows,
                                           const RateSpec& spec) {
  std::map<std::string, const CollectiveRow*> largest;
  for (const CollectiveRow& r : rows) {
    const CollectiveRow*& at = largest[r.op];
    if (at == nullptr || r.bytes > at->bytes) at = &r;
  }
  std::vector<AcceptCheck> out;
  for (const char* op : kOps) {
    if (!largest.contains(op)) continue;
    const CollectiveRow& r = *largest[op];
    const bool low = spec.expected && !spec.nominal && r.busbw < spec.floor * *spec.expected;
    AcceptCheck c = cluster_check(spec.name, spec.stage, low ? "fail" : "pass", "");
    c.measured = r.busbw;
    c.expected = spec.expected;
    c.unit = "bytes/s";
    c.source = spec.source;
    c.reason = strprintf("%s of %lld bytes over every rank: bus bandwidth ", op,
                         static_cast<long long>(r.bytes)) +
               human_rate(r.busbw, "bytes/s");
    if (spec.expected) {
      c.reason += strprintf(", %.2f x the expected ", r.busbw / *spec.expected) +
                  human_rate(*spec.expected, "bytes/s");
      if (spec.nominal) c.reason += " (nominal: not judged)";
      if (low) c.reason += strprintf(", under %.2f x it", spec.floor);
    }
    out.push_back(c);
  }
  return out;
}

}  // namespace moebench
