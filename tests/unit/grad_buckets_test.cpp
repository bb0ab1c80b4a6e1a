// make_grad_buckets on hand-made layouts: whole layers from the end of each buffer, merged up to
// the size, the padding in the first bucket, the order the backward completes them, one bucket
// per group for ZeRO-1, and the check that parameters lie layer by layer.
#include "workloads/step/grad_buckets.hpp"

#include <doctest/doctest.h>

#include "harness/core/error.hpp"
#include "tests/unit/layer_fixture.hpp"

namespace moebench {
namespace {

// A group's buffer with `sizes[l]` elements of layer l in two tensors each (0: no parameters).
void add_layers(std::vector<ParamInfo>& infos, ParamGroup g,
                const std::vector<std::int64_t>& sizes) {
  std::int64_t offset = 0;
  for (int l = 0; l < static_cast<int>(sizes.size()); ++l) {
    if (sizes[l] == 0) continue;
    for (std::int64_t part : {sizes[l] / 2, sizes[l] - sizes[l] / 2}) {
      ParamInfo p;
      p.layer = l;
      p.group = g;
      p.expert = g == ParamGroup::expert ? 0 : -1;
      p.rows = part;
      p.cols = 1;
      p.offset = offset;
      offset += part;
      infos.push_back(p);
    }
  }
}

struct Want {
  ParamGroup group;
  std::int64_t offset, numel;
  int ready_layer;
};

void check_buckets(const std::vector<GradBucket>& got, const std::vector<Want>& want) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    CHECK(got[i].group == want[i].group);
    CHECK(got[i].offset == want[i].offset);
    CHECK(got[i].numel == want[i].numel);
    CHECK(got[i].ready_layer == want[i].ready_layer);
  }
}

constexpr auto D = ParamGroup::dense;
constexpr auto X = ParamGroup::expert;

TEST_CASE("grad buckets: one per layer at size 0, last layer first, padding in the first") {
  std::vector<ParamInfo> infos;
  add_layers(infos, D, {10, 20, 30});  // [0,10) [10,30) [30,60), padded to 64
  add_layers(infos, X, {0, 8, 8});     // layers 1 and 2: [0,8) [8,16), padded to 16
  const std::int64_t padded[2] = {64, 16};
  check_buckets(make_grad_buckets(infos, padded, 0, 4, false),
                {{D, 30, 34, 2}, {X, 8, 8, 2}, {D, 10, 20, 1}, {X, 0, 8, 1}, {D, 0, 10, 0}});
}

TEST_CASE("grad buckets: layers merge until the bucket holds at least the size") {
  std::vector<ParamInfo> infos;
  add_layers(infos, D, {10, 20, 30, 5, 5});  // [0,10) [10,30) [30,60) [60,65) [65,70)
  const std::int64_t padded[2] = {72, 0};
  // 4 bytes per element, 40 bytes = 10 elements: layer 4 (5 + 2 padding) is short and takes
  // layer 3 with it (12 elements); layer 2 alone (30); layers 1 and 0 alone (20, 10).
  check_buckets(make_grad_buckets(infos, padded, 40, 4, false),
                {{D, 60, 12, 3}, {D, 30, 30, 2}, {D, 10, 20, 1}, {D, 0, 10, 0}});
  // 100 bytes = 25 elements: 12 + 30 = 42 closes at layer 2; 20 + 10 closes at the end.
  check_buckets(make_grad_buckets(infos, padded, 100, 4, false), {{D, 30, 42, 2}, {D, 0, 30, 0}});
  // Larger than everything: one bucket, ready after layer 0.
  check_buckets(make_grad_buckets(infos, padded, std::int64_t{1} << 40, 4, false), {{D, 0, 72, 0}});
}

TEST_CASE("grad buckets: ZeRO-1 takes each group whole, ready after its lowest layer") {
  std::vector<ParamInfo> infos;
  add_layers(infos, D, {10, 20, 30});
  add_layers(infos, X, {0, 8, 8});
  const std::int64_t padded[2] = {64, 16};
  check_buckets(make_grad_buckets(infos, padded, 0, 4, true), {{X, 0, 16, 1}, {D, 0, 64, 0}});
}

TEST_CASE("grad buckets: a group without parameters has none") {
  std::vector<ParamInfo> infos;
  add_layers(infos, D, {10});
  const std::int64_t padded[2] = {10, 0};
  check_buckets(make_grad_buckets(infos, padded, 0, 4, false), {{D, 0, 10, 0}});
}

TEST_CASE("grad buckets: parameters out of layer order are rejected") {
  std::vector<ParamInfo> infos;
  add_layers(infos, D, {10, 20});
  std::swap(infos[0].layer, infos[2].layer);  // layer 1's first tensor sits at offset 0
  const std::int64_t padded[2] = {30, 0};
  CHECK_THROWS_AS(make_grad_buckets(infos, padded, 0, 4, false), RuntimeError);
}

TEST_CASE("grad buckets tile the real layout's buffers exactly") {
  using namespace layer_test;
  RunConfig c = tiny_run(2, 1);
  const ParamLayout layout = make_param_layout(c, single_process_topology());
  const std::int64_t padded[2] = {layout.numel[0] + 3, layout.numel[1]};
  const std::vector<GradBucket> b = make_grad_buckets(layout.infos, padded, 0, 4, false);
  // Dense: 2 layers; expert: the MoE layer.
  REQUIRE(b.size() == 3);
  for (ParamGroup g : {D, X}) {
    std::int64_t end = padded[static_cast<int>(g)];
    int previous_layer = 2;
    for (const GradBucket& x : b) {
      if (x.group != g) continue;
      CHECK(x.offset + x.numel == end);  // contiguous, from the end down
      CHECK(x.ready_layer < previous_layer);
      end = x.offset;
      previous_layer = x.ready_layer;
    }
    CHECK(end == 0);
  }
}

}  // namespace
}  // namespace moebench
