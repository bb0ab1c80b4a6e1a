// Megatron-Core's pipeline_model_parallel_layout syntax: the expansions below are written out by
// hand from its documentation (stages split by '|', stage s is chunk s / pp of rank s % pp).
#include "harness/parallel/pipeline_layout.hpp"

#include <doctest/doctest.h>

#include <string>

#include "harness/core/error.hpp"

using namespace moebench;

TEST_CASE("the GB300 recipe's layout: 16 stages over pp 2, vp 8, 61 decoder layers") {
  const PipelineLayout l = parse_pipeline_layout("Et*4|(t*4|)*14tmL", 2);
  CHECK(l.pp == 2);
  CHECK(l.vp == 8);
  REQUIRE(l.stages.size() == 16);
  CHECK(l.decoder_layers() == 61);
  CHECK(l.mtp_layers() == 1);
  CHECK(l.has_embedding());
  CHECK(l.has_loss());
  CHECK(l.stages[0].embedding);
  CHECK(l.stages[0].layers == 4);
  CHECK(l.stages[1].first_layer == 4);
  CHECK(l.stages[15].first_layer == 60);
  CHECK(l.stages[15].layers == 1);
  CHECK(l.stages[15].mtp == 1);
  // Rank 1 holds stages 1, 3, ..., 15: chunk 0 is layers 4-7, its last chunk layer 60.
  const std::vector<int> r1 = l.layers_of_rank(1);
  CHECK(r1.size() == 29);
  CHECK(r1.front() == 4);
  CHECK(r1.back() == 60);
  CHECK(l.layers_of_rank(0).size() == 32);
}

TEST_CASE("Megatron's documented example and empty stages") {
  const PipelineLayout l = parse_pipeline_layout("Et*3|(tt|)*29,m|L", 16);
  CHECK(l.vp == 2);
  CHECK(l.decoder_layers() == 61);
  CHECK(l.stages[30].mtp == 1);
  CHECK(l.stages[30].layers == 0);
  CHECK(l.stages[31].loss);
  CHECK(l.stages[31].layers == 0);
  const PipelineLayout e = parse_pipeline_layout("E||t|L", 2);
  CHECK(e.vp == 2);
  CHECK(e.stages[1].layers == 0);
  CHECK(e.stages[2].first_layer == 0);
}

TEST_CASE("an even layout, and its text round-trips") {
  const PipelineLayout l = even_pipeline_layout(8, 2, 2);
  REQUIRE(l.stages.size() == 4);
  for (int s = 0; s < 4; ++s) {
    CHECK(l.stages[s].first_layer == 2 * s);
    CHECK(l.stages[s].layers == 2);
  }
  CHECK(l.text == "Et*2|(t*2|)*2t*2L");
  const PipelineLayout back = parse_pipeline_layout(l.text, 2);
  CHECK(back.decoder_layers() == 8);
  CHECK(back.layers_of_rank(1) == l.layers_of_rank(1));
  CHECK_THROWS_WITH_AS(even_pipeline_layout(10, 2, 2), doctest::Contains("valid --layers: 4, 8"),
                       UsageError);
}

TEST_CASE("bad layouts name the rule") {
  CHECK_THROWS_WITH_AS(parse_pipeline_layout("Et|tx|L", 2), doctest::Contains("unknown symbol 'x'"),
                       UsageError);
  CHECK_THROWS_WITH_AS(parse_pipeline_layout("Et|t|tL", 2), doctest::Contains("not a multiple"),
                       UsageError);
  CHECK_THROWS_WITH_AS(parse_pipeline_layout("tE|tL", 2), doctest::Contains("E (the embedding)"),
                       UsageError);
  CHECK_THROWS_WITH_AS(parse_pipeline_layout("EtL|t", 2),
                       doctest::Contains("L (the loss) must be in the last"), UsageError);
  CHECK_THROWS_WITH_AS(parse_pipeline_layout("Et|mtL", 2), doctest::Contains("before the m"),
                       UsageError);
  CHECK_THROWS_WITH_AS(parse_pipeline_layout("E(t|t", 2), doctest::Contains("without ')'"),
                       UsageError);
  CHECK_THROWS_WITH_AS(parse_pipeline_layout("Et*|tL", 2), doctest::Contains("without a count"),
                       UsageError);
}

TEST_CASE("a hostile layout is refused before it costs a deep stack or a large allocation") {
  const std::string nested = std::string(50000, '(') + "t" + std::string(50000, ')');
  CHECK_THROWS_WITH_AS(parse_pipeline_layout(nested, 1), doctest::Contains("nested '('"),
                       UsageError);
  try {
    parse_pipeline_layout(nested, 1);
  } catch (const UsageError& e) {
    CHECK(std::string(e.what()).size() < 600);  // the text quoted in part, on one line
  }
  CHECK_THROWS_WITH_AS(parse_pipeline_layout("((t*1000)*1000)*1000", 1),
                       doctest::Contains("longer than 10^6"), UsageError);
  // 64 levels are fine.
  const std::string deep = std::string(64, '(') + "t" + std::string(64, ')');
  CHECK(parse_pipeline_layout(deep, 1).decoder_layers() == 1);
}

TEST_CASE("nothing follows the loss") {
  CHECK_THROWS_WITH_AS(parse_pipeline_layout("Et|tLt", 2),
                       doctest::Contains("nothing may follow L"), UsageError);
}
