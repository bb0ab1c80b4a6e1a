// The parallel grid: every rank's coordinates in Megatron-Core's order, "tp-cp-ep-dp-pp", and
// every process group built from them. It is the only place that turns a rank number into group
// membership; communicators, the parameter layout and the step ask it and never compute groups
// from rank arithmetic of their own.
//
// As in Megatron-Core's RankGenerator (megatron/core/parallel_state.py), the first dimension of
// the order varies fastest. Dense parameters see the grid tp x cp x dp x pp (ep = 1 there), the
// experts see etp x ep x edp x pp (etp = 1, cp folded into edp), so
//   rank = tp_rank + tp * (cp_rank + cp * (dp_rank + dp * pp_rank))
//        = ep_rank + ep * (edp_rank + edp * pp_rank)       (tp = etp = 1)
// with dp = world / (tp cp pp) and edp = world / (ep pp): the expert-parallel group is EP
// consecutive ranks of one pipeline stage, and a pipeline group is the ranks world / pp apart.
// TP and CP are part of the map and always 1 for now.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace moebench {

enum class Group : int {
  world,        // every rank
  tensor,       // tensor-parallel (size 1 for now)
  context,      // context-parallel (size 1 for now)
  data,         // the ranks holding the same dense parameters (Megatron's "dp")
  pipeline,     // one rank of every pipeline stage (size pp)
  embedding,    // the first and the last stage of a pipeline group (Megatron's embedding group;
                // a rank of a middle stage is in none)
  expert,       // the EP ranks that split the routed experts between them (consecutive ranks)
  expert_data,  // the ranks holding the same experts (Megatron's expert "dp")
  count
};
constexpr std::size_t kGroupCount = static_cast<std::size_t>(Group::count);
constexpr std::array<Group, kGroupCount> kGroups = {
    Group::world,    Group::tensor,    Group::context, Group::data,
    Group::pipeline, Group::embedding, Group::expert,  Group::expert_data};
const char* group_name(Group g);

// Where a rank sits in one group: its index there and the group's size; {-1, 0} for a rank that
// is in no group of that kind (a middle pipeline stage and the embedding group).
struct GroupInfo {
  int rank = 0;
  int size = 1;
  bool member() const { return size > 0; }
};

// The sizes of the dimensions that are set; dp and edp follow from the world size.
struct GridShape {
  int tp = 1;
  int cp = 1;
  int ep = 1;
  int pp = 1;
};

class ParallelGrid {
 public:
  static constexpr const char* kOrder = "tp-cp-ep-dp-pp";

  ParallelGrid() = default;  // one rank
  // UsageError, naming the valid values, when a size is below 1 or the world is not a multiple of
  // tp x cp x pp (the dense grid) and of ep x pp (the experts' grid).
  ParallelGrid(int world, GridShape shape);

  int world() const { return world_; }
  int tp() const { return shape_.tp; }
  int cp() const { return shape_.cp; }
  int ep() const { return shape_.ep; }
  int pp() const { return shape_.pp; }
  int dp() const { return world_ / (shape_.tp * shape_.cp * shape_.pp); }
  int edp() const { return world_ / (shape_.ep * shape_.pp); }
  const GridShape& shape() const { return shape_; }

  // Every group of kind g, each the world ranks in group-rank order, the groups in Megatron's
  // order (the index a rank's group has here is its MPI_Comm_split colour).
  std::vector<std::vector<int>> groups(Group g) const;
  // The index of rank's group of kind g in groups(g), or -1 when it is in none.
  int group_index(Group g, int rank) const;
  // The members of rank's group (empty when it is in none).
  std::vector<int> members(Group g, int rank) const;
  GroupInfo info(Group g, int rank) const;

 private:
  int world_ = 1;
  GridShape shape_;
};

// "tp 1, cp 1, ep 4, dp 8, pp 1 (edp 8)".
std::string describe(const ParallelGrid& grid);
// The order and every size, for the reports' parallel.grid.
nlohmann::json to_json(const ParallelGrid& g);

}  // namespace moebench
