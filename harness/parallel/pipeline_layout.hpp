// Which layers each pipeline stage holds: Megatron-Core's pipeline_model_parallel_layout. A layout
// is P x V stages (P pipeline ranks, V model chunks per rank); stage s is chunk s / P of pipeline
// rank s % P, so the string lists chunk 0 of every rank first. Each stage holds consecutive
// decoder layers ('t'), and the first stage the embedding ('E'), the last the loss ('L'), with any
// MTP layers ('m') after the last decoder layer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace moebench {

struct PipelineStage {
  int first_layer = 0;  // global index of its first decoder layer
  int layers = 0;       // decoder layers it holds
  bool embedding = false;
  bool loss = false;
  int mtp = 0;  // MTP layers it holds
};

struct PipelineLayout {
  int pp = 1;
  int vp = 1;
  std::vector<PipelineStage> stages;  // pp * vp, in layout order
  std::string text;                   // as given, or the even split written in the same syntax

  int stage_index(int pp_rank, int chunk) const { return chunk * pp + pp_rank; }
  const PipelineStage& stage(int pp_rank, int chunk) const {
    return stages[static_cast<std::size_t>(stage_index(pp_rank, chunk))];
  }
  int decoder_layers() const;
  int mtp_layers() const;
  bool has_embedding() const;
  bool has_loss() const;
  // The global decoder layers pipeline rank `pp_rank` holds, chunk by chunk.
  std::vector<int> layers_of_rank(int pp_rank) const;
};

// Parses the layout syntax: 'E', 't', 'm', 'L', '|' between stages, "X*N" and "(...)*N"
// repetition, ',' and spaces ignored (e.g. "Et*4|(t*4|)*14tmL"). The number of stages must be a
// multiple of pp (V = stages / pp). UsageError naming the position and the rule otherwise, or
// when E is not at the start of the first stage, L not at the end of the last, or m not after
// every t.
PipelineLayout parse_pipeline_layout(const std::string& text, int pp);

// `layers` decoder layers split evenly over pp * vp stages, with `ends` the embedding on the first
// and the loss on the last, and `mtp` MTP layers on the last; UsageError naming the valid counts
// when they do not divide.
PipelineLayout even_pipeline_layout(int layers, int pp, int vp, bool ends = true, int mtp = 0);

// The layout in its own syntax, compressed ("Et*2|t*2|t*2|t*2L").
std::string layout_text(const std::vector<PipelineStage>& stages);

}  // namespace moebench
