// JSON Schema (draft-07) validation of reports and inputs, through valijson. Only this file's
// .cpp includes valijson, so its exception mode and adapter stay in one place.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace moebench {

// One readable message per failure, "<path>: <what>" with a JSON-pointer path ("/meta/argv/0";
// "/" for the document itself). Empty when `doc` is valid. A schema that cannot be parsed is a
// RuntimeError.
std::vector<std::string> schema_errors(const nlohmann::json& doc, const nlohmann::json& schema);

// A schema parsed once and applied to many documents (`moebench report` reads thousands of run
// reports; parsing the schema for each would dominate). errors() is schema_errors() without the
// parse. RuntimeError when the schema cannot be parsed.
class SchemaValidator {
 public:
  explicit SchemaValidator(const nlohmann::json& schema);
  ~SchemaValidator();
  SchemaValidator(const SchemaValidator&) = delete;
  SchemaValidator& operator=(const SchemaValidator&) = delete;
  std::vector<std::string> errors(const nlohmann::json& doc) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The path of reports/<file_name>: next to the executable or one folder up (the build copies the
// schemas to <build>/reports/), else in the source tree the binary was built from. RuntimeError
// otherwise, listing where it looked.
std::string find_schema(const std::string& file_name);

// find_schema + parse. RuntimeError when the file cannot be read or is not JSON.
nlohmann::json load_schema(const std::string& file_name);

// RuntimeError naming the first number in `doc` that is infinite or NaN ("what: points/0/
// prediction/step_s is infinite"): nlohmann writes those as null, which a schema that asks for a
// number then refuses, so a document moebench writes is checked before it is written.
void check_finite_numbers(const nlohmann::ordered_json& doc, const std::string& what);

}  // namespace moebench
