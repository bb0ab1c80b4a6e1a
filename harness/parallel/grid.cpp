#include "harness/parallel/grid.hpp"

#include <algorithm>
#include <string>

#include <nlohmann/json.hpp>

#include "harness/core/error.hpp"
#include "harness/core/human.hpp"

namespace moebench {

namespace {

// The dimensions of one of the two grids in rank order (fastest first) and which of them a group
// kind spans: Megatron-Core's generate_masked_orthogonal_rank_groups. The ranks of a group vary
// the spanned (masked) dimensions; the groups enumerate the others.
struct Dims {
  std::vector<int> size;
  std::vector<bool> spanned;
};

std::vector<std::vector<int>> masked_groups(int world, const Dims& d) {
  std::vector<int> stride(d.size.size());
  int s = 1;
  for (std::size_t i = 0; i < d.size.size(); ++i) {
    stride[i] = s;
    s *= d.size[i];
  }
  std::vector<int> in_size, in_stride, out_size, out_stride;
  for (std::size_t i = 0; i < d.size.size(); ++i) {
    (d.spanned[i] ? in_size : out_size).push_back(d.size[i]);
    (d.spanned[i] ? in_stride : out_stride).push_back(stride[i]);
  }
  int group_size = 1;
  for (int v : in_size) group_size *= v;
  // index -> the rank offset of its decomposition over (sizes, strides), first size fastest.
  auto offset = [](int index, const std::vector<int>& sizes, const std::vector<int>& strides) {
    int r = 0;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      r += (index % sizes[i]) * strides[i];
      index /= sizes[i];
    }
    return r;
  };
  std::vector<std::vector<int>> out;
  for (int g = 0; g < world / group_size; ++g) {
    std::vector<int> ranks;
    for (int i = 0; i < group_size; ++i) {
      ranks.push_back(offset(i, in_size, in_stride) + offset(g, out_size, out_stride));
    }
    out.push_back(std::move(ranks));
  }
  return out;
}

}  // namespace

const char* group_name(Group g) {
  switch (g) {
    case Group::world:
      return "world";
    case Group::tensor:
      return "tensor";
    case Group::context:
      return "context";
    case Group::data:
      return "data";
    case Group::pipeline:
      return "pipeline";
    case Group::embedding:
      return "embedding";
    case Group::expert:
      return "expert";
    case Group::expert_data:
      return "expert_data";
    case Group::count:
      break;
  }
  return "?";
}

ParallelGrid::ParallelGrid(int world, GridShape shape) : world_(world), shape_(shape) {
  MB_CHECK(world >= 1, "a parallel grid of " << world << " ranks");
  const auto fail = [&](const std::string& flag, int value, int over, const std::string& what) {
    throw UsageError(flag + " " + std::to_string(value) + " does not divide the " +
                     std::to_string(over) + (over == 1 ? " rank" : " ranks") + what +
                     "; valid: " + common_divisors(over, {over}));
  };
  for (const auto& [flag, v] : {std::pair<std::string, int>{"--tp", shape.tp},
                                {"--cp", shape.cp},
                                {"--ep", shape.ep},
                                {"--pp", shape.pp}}) {
    if (v < 1) throw UsageError(flag + " must be >= 1, got " + std::to_string(v));
  }
  if (world % shape.pp != 0) fail("--pp", shape.pp, world, "");
  const int stage = world / shape.pp;
  const std::string of_stage = shape.pp == 1 ? ""
                                             : " of a pipeline stage (" + std::to_string(world) +
                                                   " / pp " + std::to_string(shape.pp) + ")";
  if (stage % shape.ep != 0) fail("--ep", shape.ep, stage, of_stage);
  if (stage % shape.tp != 0) fail("--tp", shape.tp, stage, of_stage);
  if ((stage / shape.tp) % shape.cp != 0) fail("--cp", shape.cp, stage / shape.tp, of_stage);
}

std::vector<std::vector<int>> ParallelGrid::groups(Group g) const {
  const int tp = shape_.tp, cp = shape_.cp, ep = shape_.ep, pp = shape_.pp;
  // Order tp-cp-ep-dp-pp; the dense grid has ep 1, the experts' grid etp 1 and cp 1.
  const Dims dense{{tp, cp, 1, dp(), pp}, {}};
  const Dims expert{{1, 1, ep, edp(), pp}, {}};
  auto span = [&](Dims d, std::vector<bool> mask) {
    d.spanned = std::move(mask);
    return masked_groups(world_, d);
  };
  switch (g) {
    case Group::world:
      return span(dense, {true, true, true, true, true});
    case Group::tensor:
      return span(dense, {true, false, false, false, false});
    case Group::context:
      return span(dense, {false, true, false, false, false});
    case Group::data:
      return span(dense, {false, false, false, true, false});
    case Group::pipeline:
      return span(dense, {false, false, false, false, true});
    case Group::embedding: {
      // Megatron: [first, last] of every pipeline group with more than one stage, else itself.
      std::vector<std::vector<int>> out;
      for (const std::vector<int>& p : groups(Group::pipeline)) {
        out.push_back(p.size() > 1 ? std::vector<int>{p.front(), p.back()} : p);
      }
      return out;
    }
    case Group::expert:
      return span(expert, {false, false, true, false, false});
    case Group::expert_data:
      return span(expert, {false, false, false, true, false});
    case Group::count:
      break;
  }
  MB_CHECK(false, "no such group kind " << static_cast<int>(g));
  return {};
}

int ParallelGrid::group_index(Group g, int rank) const {
  MB_CHECK(rank >= 0 && rank < world_, "rank " << rank << " of " << world_);
  const std::vector<std::vector<int>> all = groups(g);
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (std::find(all[i].begin(), all[i].end(), rank) != all[i].end()) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

std::vector<int> ParallelGrid::members(Group g, int rank) const {
  const int i = group_index(g, rank);
  if (i < 0) return {};
  return groups(g)[static_cast<std::size_t>(i)];
}

GroupInfo ParallelGrid::info(Group g, int rank) const {
  const std::vector<int> m = members(g, rank);
  if (m.empty()) return {-1, 0};
  const auto at = std::find(m.begin(), m.end(), rank);
  return {static_cast<int>(at - m.begin()), static_cast<int>(m.size())};
}

std::string describe(const ParallelGrid& grid) {
  return "tp " + std::to_string(grid.tp()) + ", cp " + std::to_string(grid.cp()) + ", ep " +
         std::to_string(grid.ep()) + ", dp " + std::to_string(grid.dp()) + ", pp " +
         std::to_string(grid.pp()) + " (edp " + std::to_string(grid.edp()) + ")";
}

nlohmann::json to_json(const ParallelGrid& g) {
  return nlohmann::json{{"order", ParallelGrid::kOrder},
                        {"tp", g.tp()},
                        {"cp", g.cp()},
                        {"ep", g.ep()},
                        {"dp", g.dp()},
                        {"pp", g.pp()},
                        {"edp", g.edp()}};
}

}  // namespace moebench
