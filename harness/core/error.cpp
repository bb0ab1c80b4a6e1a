#include "harness/core/error.hpp"

namespace moebench::detail {

void throw_check_failure(const char* expr, const char* file, int line, const std::string& message) {
  std::ostringstream os;
  os << message << " (check `" << expr << "` failed at " << file << ":" << line << ")";
  throw RuntimeError(os.str());
}

}  // namespace moebench::detail
