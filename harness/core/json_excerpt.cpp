#include "harness/core/json_excerpt.hpp"

#include <nlohmann/json.hpp>

namespace moebench {

std::string json_excerpt(const nlohmann::json& v, std::size_t max_chars) {
  if (v.is_object()) return "an object of " + std::to_string(v.size()) + " keys";
  if (v.is_array()) return "an array of " + std::to_string(v.size()) + " values";
  // A scalar: dump() does not recurse. ASCII, so the cut never splits a character.
  std::string s = v.dump(-1, ' ', true);
  if (s.size() > max_chars) {
    s = s.substr(0, max_chars) + "... (" + std::to_string(s.size()) + " characters)";
  }
  return s;
}

}  // namespace moebench
