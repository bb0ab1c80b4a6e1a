// The recipes by name and the tile each gives each operand of a linear GEMM.
#include "harness/compute/fp8_recipe.hpp"

#include <doctest/doctest.h>

#include "harness/core/error.hpp"

namespace moebench {
namespace {

TEST_CASE("fp8 recipes: names round-trip, a bad one names the valid ones") {
  for (Fp8Recipe r : {Fp8Recipe::tensor, Fp8Recipe::blockwise, Fp8Recipe::mxfp8}) {
    CHECK(parse_fp8_recipe(to_string(r)) == r);
    CHECK_FALSE(describe(r).empty());
  }
  try {
    parse_fp8_recipe("nvfp4");
    CHECK(false);
  } catch (const UsageError& e) {
    const std::string m = e.what();
    CHECK(m.find("--fp8-recipe nvfp4") == 0);
    CHECK(m.find("tensor") != std::string::npos);
    CHECK(m.find("blockwise") != std::string::npos);
    CHECK(m.find("mxfp8") != std::string::npos);
  }
}

TEST_CASE("fp8 recipes: only with --precision fp8; tensor when not given") {
  CHECK(resolve_fp8_recipe(std::nullopt, Precision::bf16) == Fp8Recipe::tensor);
  CHECK(resolve_fp8_recipe(std::nullopt, Precision::fp8) == Fp8Recipe::tensor);
  CHECK(resolve_fp8_recipe(Fp8Recipe::mxfp8, Precision::fp8) == Fp8Recipe::mxfp8);
  CHECK_THROWS_WITH_AS(resolve_fp8_recipe(Fp8Recipe::blockwise, Precision::bf16),
                       doctest::Contains("--fp8-recipe blockwise needs --precision fp8"),
                       UsageError);
}

TEST_CASE("fp8 recipes: tiles of each operand, the weight being B without trans_a") {
  CHECK(is_weight(Fp8Operand::b, false));
  CHECK_FALSE(is_weight(Fp8Operand::b, true));  // a weight gradient: x^T dy
  CHECK_FALSE(is_weight(Fp8Operand::a, false));
  const Fp8Tile whole = operand_tile(Fp8Recipe::tensor, Fp8Operand::b, false);
  CHECK((whole.outer == 0 && whole.k == 0 && !whole.power_of_two));
  const Fp8Tile weight = operand_tile(Fp8Recipe::blockwise, Fp8Operand::b, false);
  CHECK((weight.outer == 128 && weight.k == 128 && !weight.power_of_two));
  for (bool trans_a : {false, true}) {
    const Fp8Tile act = operand_tile(Fp8Recipe::blockwise, Fp8Operand::a, trans_a);
    CHECK((act.outer == 1 && act.k == 128));
  }
  const Fp8Tile grad = operand_tile(Fp8Recipe::blockwise, Fp8Operand::b, true);
  CHECK((grad.outer == 1 && grad.k == 128));
  for (Fp8Operand w : {Fp8Operand::a, Fp8Operand::b}) {
    const Fp8Tile mx = operand_tile(Fp8Recipe::mxfp8, w, false);
    CHECK((mx.outer == 1 && mx.k == 32 && mx.power_of_two));
  }
}

}  // namespace
}  // namespace moebench
