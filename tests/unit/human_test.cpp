#include "harness/core/human.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <regex>
#include <string>

#include "harness/core/error.hpp"

using namespace moebench;

TEST_CASE("format_gib prints binary gigabytes with the digits asked") {
  CHECK(format_gib(1.5 * kGiB) == "1.50 GiB");
  CHECK(format_gib(3 * kGiB / 8, 3) == "0.375 GiB");
  CHECK(format_gib(0) == "0.00 GiB");
}

TEST_CASE("iso_time_utc is ISO 8601 in UTC") {
  CHECK(std::regex_match(iso_time_utc(), std::regex(R"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z)")));
}

TEST_CASE("common_divisors lists the sizes that divide every number, for usage errors") {
  CHECK(common_divisors(6, {6}) == "1, 2, 3, 6");
  CHECK(common_divisors(8, {8, 12}) == "1, 2, 4");
  CHECK(common_divisors(1, {1}) == "1");
  CHECK(common_divisors(0, {4}).empty());
}

TEST_CASE("strprintf formats text of any length; finite_figure lets only numbers through") {
  CHECK(strprintf("%7s|%.3f", "gpus", 1.5) == "   gpus|1.500");
  const std::string wide = strprintf("%400.1f", 2.0);
  CHECK(wide.size() == 400);
  CHECK(wide.substr(397) == "2.0");
  CHECK(finite_figure(3.5, "x") == 3.5);
  CHECK_THROWS_WITH_AS(finite_figure(HUGE_VAL, "the step"),
                       doctest::Contains("the step came out as infinite"), RuntimeError);
  CHECK_THROWS_WITH_AS(finite_figure(std::nan(""), "a ratio"), doctest::Contains("NaN"),
                       RuntimeError);
}

TEST_CASE("join puts the separator between items only") {
  CHECK(join({}, ",").empty());
  CHECK(join({"a"}, ",") == "a");
  CHECK(join({"mla_up_proj", "mlp"}, ",") == "mla_up_proj,mlp");
  CHECK(join({"x", "y", "z"}, " and ") == "x and y and z");
  CHECK(join({"", "b"}, ",") == ",b");  // an empty first item still gets its separator
}

TEST_CASE("rates for people: FLOP/s in TFLOP/s, bytes/s in GB/s, a fraction in %, four digits") {
  CHECK(human_rate(1.2346e15, "FLOP/s") == "1235 TFLOP/s");
  CHECK(human_rate(0.05, "fraction") == "5 %");
  CHECK(human_rate(8.123e11, "bytes/s") == "812.3 GB/s");
  CHECK(human_rate(3, "values") == "3 values");
  CHECK(rate_scale("FLOP/s").per == 1e12);
  CHECK(rate_scale("bytes/s").name == "GB/s");
}
