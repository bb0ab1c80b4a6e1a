#include "harness/output/schema.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "harness/core/error.hpp"

using namespace moebench;

namespace {

const nlohmann::json kSchema = nlohmann::json::parse(R"({
  "$schema": "http://json-schema.org/draft-07/schema#",
  "type": "object",
  "required": ["name", "items"],
  "additionalProperties": false,
  "properties": {
    "name": {"type": "string"},
    "items": {"type": "array", "items": {"type": "object", "required": ["x"],
              "properties": {"x": {"type": "number", "minimum": 0}}}}
  }
})");

}  // namespace

TEST_CASE("schema: a valid document has no errors") {
  const auto doc = nlohmann::json::parse(R"({"name": "a", "items": [{"x": 1}, {"x": 0.5}]})");
  CHECK(schema_errors(doc, kSchema).empty());
}

TEST_CASE("schema: errors name the JSON pointer of the offending value") {
  const auto doc = nlohmann::json::parse(R"({"name": 3, "items": [{"x": 1}, {"x": -2}, {}]})");
  const auto errors = schema_errors(doc, kSchema);
  REQUIRE(errors.size() == 3);
  std::string all;
  for (const auto& e : errors) all += e + "\n";
  CHECK(all.find("/name: Value type not permitted by 'type' constraint. (found number)") !=
        std::string::npos);
  CHECK(all.find("/items/1/x: ") != std::string::npos);
  CHECK(all.find("/items/2: Missing required property 'x'") != std::string::npos);
}

TEST_CASE("schema: a failure at the top level is reported at /") {
  const auto errors = schema_errors(nlohmann::json::parse(R"({"name": "a", "extra": 1})"), kSchema);
  REQUIRE(!errors.empty());
  for (const auto& e : errors) CHECK(e.rfind("/: ", 0) == 0);
}

TEST_CASE("schema: an invalid schema is a runtime error") {
  const auto bad = nlohmann::json::parse(R"({"type": 12})");
  CHECK_THROWS_AS(schema_errors(nlohmann::json::object(), bad), RuntimeError);
}

TEST_CASE("schema: find_schema locates the committed schemas and rejects unknown names") {
  const std::string path = find_schema("run.schema.json");
  CHECK(path.ends_with("/reports/run.schema.json"));
  CHECK(load_schema("run.schema.json").at("$schema") == "http://json-schema.org/draft-07/schema#");
  CHECK_THROWS_AS(find_schema("no-such.schema.json"), RuntimeError);
}

TEST_CASE("schema: a constraint that fails without a message still yields an error") {
  // valijson's propertyNames returns false without recording why.
  const auto schema =
      nlohmann::json::parse(R"({"type": "object", "propertyNames": {"maxLength": 1}})");
  CHECK(schema_errors(nlohmann::json::parse(R"({"a": 1})"), schema).empty());
  CHECK(schema_errors(nlohmann::json::parse(R"({"long": 1})"), schema).size() == 1);
}

TEST_CASE("schema: a document with an infinite or NaN number is refused, naming where") {
  nlohmann::ordered_json doc = {{"points", {{{"step_s", 1.5}}, {{"step_s", 2.0}}}}};
  CHECK_NOTHROW(check_finite_numbers(doc, "predict"));
  doc["points"][1]["step_s"] = std::numeric_limits<double>::infinity();
  CHECK_THROWS_WITH_AS(check_finite_numbers(doc, "predict"),
                       doctest::Contains("predict: /points/1/step_s is infinite"), RuntimeError);
  doc["points"][1]["step_s"] = std::nan("");
  CHECK_THROWS_WITH_AS(check_finite_numbers(doc, "predict"), doctest::Contains("NaN"),
                       RuntimeError);
}
