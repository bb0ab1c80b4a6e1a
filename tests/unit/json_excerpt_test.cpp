// json_excerpt: scalars quoted (ASCII, cut), containers by kind and size, nothing recursive.
#include "harness/core/json_excerpt.hpp"

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

namespace moebench {
namespace {

TEST_CASE("json_excerpt: short scalars as JSON, long ones cut with their length") {
  CHECK(json_excerpt(nlohmann::json(42)) == "42");
  CHECK(json_excerpt(nlohmann::json("abc")) == "\"abc\"");
  CHECK(json_excerpt(nlohmann::json(nullptr)) == "null");
  CHECK(json_excerpt(nlohmann::json("\xc3\xa9t\xc3\xa9")) == "\"\\u00e9t\\u00e9\"");  // ASCII
  const std::string cut = json_excerpt(nlohmann::json(std::string(100, 'y')), 10);
  CHECK(cut == "\"yyyyyyyyy... (102 characters)");
}

TEST_CASE("json_excerpt: objects and arrays by size only, however deep") {
  CHECK(json_excerpt(nlohmann::json::object({{"a", 1}, {"b", 2}})) == "an object of 2 keys");
  nlohmann::json deep = nlohmann::json::array();
  for (int i = 0; i < 50000; ++i) deep = nlohmann::json::array({std::move(deep)});
  CHECK(json_excerpt(deep) == "an array of 1 values");
}

}  // namespace
}  // namespace moebench
