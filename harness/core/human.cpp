#include "harness/core/human.hpp"

#include <cstdio>
#include <ctime>

namespace moebench {

std::string format_gib(double bytes, int digits) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f GiB", digits, bytes / kGiB);
  return buf;
}

std::string iso_time_utc() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace moebench
