// SHA-256 of a report's bytes, so a scaling report names exactly which files it merged. OpenSSL's
// libcrypto computes it (no hand-written crypto).
#pragma once

#include <string>
#include <string_view>

namespace moebench {

// Lower-case hex digest (64 characters) of `bytes`.
std::string sha256_hex(std::string_view bytes);

}  // namespace moebench
