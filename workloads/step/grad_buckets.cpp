#include "workloads/step/grad_buckets.hpp"

#include <algorithm>
#include <iterator>
#include <map>

#include "harness/core/error.hpp"

namespace moebench {

namespace {
struct LayerRange {
  std::int64_t lo = 0;
  std::int64_t hi = 0;
};

// Each layer's [lo, hi) in the group's buffer, checked to tile [0, numel) in layer order.
std::map<int, LayerRange> layer_ranges(const std::vector<ParamInfo>& infos, ParamGroup g) {
  std::map<int, LayerRange> ranges;
  for (const ParamInfo& p : infos) {
    if (p.group != g || p.numel() == 0) continue;
    auto [it, fresh] = ranges.try_emplace(p.layer, LayerRange{p.offset, p.offset + p.numel()});
    if (!fresh) {
      it->second.lo = std::min(it->second.lo, p.offset);
      it->second.hi = std::max(it->second.hi, p.offset + p.numel());
    }
  }
  std::int64_t next = 0;
  for (const auto& [layer, r] : ranges) {
    MB_CHECK(r.lo == next, "gradient buckets: layer " << layer << " starts at element " << r.lo
                                                      << ", expected " << next
                                                      << " (parameters must lie layer by layer)");
    next = r.hi;
  }
  return ranges;
}
}  // namespace

std::vector<GradBucket> make_grad_buckets(const std::vector<ParamInfo>& infos,
                                          const std::int64_t padded_numel[2],
                                          std::int64_t bucket_bytes, std::int64_t bytes_per_element,
                                          bool whole_groups) {
  std::vector<GradBucket> out;
  for (ParamGroup g : {ParamGroup::dense, ParamGroup::expert}) {
    const std::map<int, LayerRange> ranges = layer_ranges(infos, g);
    if (ranges.empty()) continue;
    const std::int64_t padded = padded_numel[static_cast<int>(g)];
    MB_CHECK(padded >= ranges.rbegin()->second.hi,
             "gradient buckets: the padded buffer is smaller than its parameters");
    if (whole_groups) {
      out.push_back({g, 0, padded, ranges.begin()->first});
      continue;
    }
    std::int64_t hi = padded;  // the open bucket's end: the padding joins the first bucket
    for (auto it = ranges.rbegin(); it != ranges.rend(); ++it) {
      const std::int64_t lo = it->second.lo;
      const bool last = std::next(it) == ranges.rend();
      if ((hi - lo) * bytes_per_element >= bucket_bytes || last) {
        out.push_back({g, lo, hi - lo, it->first});
        hi = lo;
      }
    }
  }
  // The backward finishes higher layers first; stable, so dense stays before expert.
  std::stable_sort(out.begin(), out.end(), [](const GradBucket& a, const GradBucket& b) {
    return a.ready_layer > b.ready_layer;
  });
  return out;
}

}  // namespace moebench
