// A bad value from a user's file, quoted for a one-line error message: a scalar as JSON (ASCII,
// cut to a short excerpt), an object or array by its kind and size only, so that a value nested
// 200,000 deep or 100 MB long neither recurses without bound nor floods the message.
#pragma once

#include <cstddef>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace moebench {

std::string json_excerpt(const nlohmann::json& v, std::size_t max_chars = 60);

}  // namespace moebench
