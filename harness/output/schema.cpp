#include "harness/output/schema.hpp"

#include <unistd.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <stdexcept>

// valijson reports schema problems by exception only when asked to (its default aborts).
#define VALIJSON_USE_EXCEPTIONS 1
// GCC 12 warns falsely (-Wrestrict) inside valijson's json_pointer string handling.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wrestrict"
#include <valijson/adapters/nlohmann_json_adapter.hpp>
#include <valijson/schema.hpp>
#include <valijson/schema_parser.hpp>
#include <valijson/validation_results.hpp>
#include <valijson/validator.hpp>
#pragma GCC diagnostic pop

#include "harness/core/error.hpp"

namespace moebench {

namespace {

// valijson's context is {"<root>", "[key]", "[0]", ...}; turn it into a JSON pointer.
nlohmann::json::json_pointer pointer_of(const std::vector<std::string>& context) {
  nlohmann::json::json_pointer ptr;
  for (const std::string& part : context) {
    if (part == "<root>") continue;
    if (part.size() >= 2 && part.front() == '[' && part.back() == ']') {
      ptr /= part.substr(1, part.size() - 2);
    } else {
      ptr /= part;
    }
  }
  return ptr;
}

// valijson repeats each failure at every enclosing object and array; the innermost one says it.
bool is_wrapper(const std::string& description) {
  return description.starts_with("Failed to validate against schema associated with property") ||
         description.starts_with("Failed to validate item #") ||
         description.starts_with("Failed to validate against additional properties schema") ||
         description.starts_with("Failed to validate against schema associated with pattern");
}

std::string found_type(const nlohmann::json& doc, const nlohmann::json::json_pointer& ptr) {
  try {
    return doc.at(ptr).type_name();
  } catch (const nlohmann::json::exception&) {
    return "";
  }
}

bool file_exists(const std::string& path) {
  return std::ifstream(path).good();
}

std::string executable_directory() {
  char buf[4096] = {};
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "";
  std::string exe(buf, static_cast<std::size_t>(n));
  const auto slash = exe.find_last_of('/');
  return slash == std::string::npos ? "." : exe.substr(0, slash);
}

}  // namespace

struct SchemaValidator::Impl {
  nlohmann::json source;  // kept alive with the parsed schema that was built from it
  valijson::Schema parsed;
};

SchemaValidator::SchemaValidator(const nlohmann::json& schema) : impl_(std::make_unique<Impl>()) {
  impl_->source = schema;
  try {
    valijson::SchemaParser parser(valijson::SchemaParser::kDraft7);
    parser.populateSchema(valijson::adapters::NlohmannJsonAdapter(impl_->source), impl_->parsed);
  } catch (const std::exception& e) {
    throw RuntimeError(std::string("invalid JSON Schema: ") + e.what());
  }
}

SchemaValidator::~SchemaValidator() = default;

std::vector<std::string> schema_errors(const nlohmann::json& doc, const nlohmann::json& schema) {
  return SchemaValidator(schema).errors(doc);
}

std::vector<std::string> SchemaValidator::errors(const nlohmann::json& doc) const {
  valijson::Validator validator;
  valijson::ValidationResults results;
  const bool valid =
      validator.validate(impl_->parsed, valijson::adapters::NlohmannJsonAdapter(doc), &results);

  std::vector<std::string> all;
  std::vector<std::string> specific;
  valijson::ValidationResults::Error error;
  while (results.popError(error)) {
    const auto ptr = pointer_of(error.context);
    std::string message =
        (ptr.empty() ? std::string("/") : ptr.to_string()) + ": " + error.description;
    if (error.description.find("'type' constraint") != std::string::npos) {
      const std::string type = found_type(doc, ptr);
      if (!type.empty()) message += " (found " + type + ")";
    }
    if (!is_wrapper(error.description)) specific.push_back(message);
    all.push_back(std::move(message));
  }
  // Some constraints (propertyNames) fail without a message; never call such a document valid.
  if (!valid && all.empty()) all.push_back("/: does not match the schema (no detail available)");
  return specific.empty() ? all : specific;
}

std::string find_schema(const std::string& file_name) {
  std::vector<std::string> tried;
  const std::string exe_dir = executable_directory();
  if (!exe_dir.empty()) {
    tried.push_back(exe_dir + "/reports/" + file_name);
    tried.push_back(exe_dir + "/../reports/" + file_name);  // binaries in build subfolders
  }
#ifdef MOEBENCH_SOURCE_DIR
  tried.push_back(std::string(MOEBENCH_SOURCE_DIR) + "/reports/" + file_name);
#endif
  for (const std::string& path : tried) {
    if (file_exists(path)) return path;
  }
  std::ostringstream os;
  os << "schema " << file_name << " not found; looked in:";
  for (const std::string& path : tried) os << " " << path;
  throw RuntimeError(os.str());
}

nlohmann::json load_schema(const std::string& file_name) {
  const std::string path = find_schema(file_name);
  std::ifstream in(path);
  if (!in) throw RuntimeError("cannot read schema " + path);
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    throw RuntimeError("schema " + path + " is not valid JSON: " + e.what());
  }
}

namespace {
void check_finite_at(const nlohmann::ordered_json& j, const std::string& at,
                     const std::string& what) {
  if (j.is_number_float()) {
    const double v = j.get<double>();
    if (!std::isfinite(v)) {
      throw RuntimeError(what + ": " + (at.empty() ? "/" : at) + " is " +
                         (std::isnan(v) ? "NaN" : "infinite") +
                         ", not a figure; an input figure is out of any real system's range");
    }
  } else if (j.is_object()) {
    for (const auto& [key, value] : j.items()) check_finite_at(value, at + "/" + key, what);
  } else if (j.is_array()) {
    for (std::size_t i = 0; i < j.size(); ++i) {
      check_finite_at(j[i], at + "/" + std::to_string(i), what);
    }
  }
}
}  // namespace

void check_finite_numbers(const nlohmann::ordered_json& doc, const std::string& what) {
  check_finite_at(doc, "", what);
}

}  // namespace moebench
