#include "harness/core/host.hpp"

#include <unistd.h>

namespace moebench {

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) == 0 && buf[0] != '\0') return buf;
  return "unknown";
}

}  // namespace moebench
