#include "harness/core/human.hpp"

#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <ctime>

#include "harness/core/error.hpp"

namespace moebench {

std::string format_gib(double bytes, int digits) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f GiB", digits, bytes / kGiB);
  return buf;
}

std::string common_divisors(std::int64_t limit, std::initializer_list<std::int64_t> of) {
  std::string out;
  for (std::int64_t d = 1; d <= limit; ++d) {
    bool ok = true;
    for (std::int64_t v : of) ok = ok && v % d == 0;
    if (ok) out += (out.empty() ? "" : ", ") + std::to_string(d);
  }
  return out;
}

std::string iso_time_utc() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string join(const std::vector<std::string>& items, std::string_view sep) {
  std::string out;
  for (const std::string& item : items) {
    if (!out.empty() || &item != &items.front()) out += sep;
    out += item;
  }
  return out;
}

std::string strprintf(const char* format, ...) {
  va_list args;
  va_start(args, format);
  va_list again;
  va_copy(again, args);
  const int n = std::vsnprintf(nullptr, 0, format, args);
  va_end(args);
  std::string out(n > 0 ? static_cast<std::size_t>(n) : 0, '\0');
  if (n > 0) std::vsnprintf(out.data(), out.size() + 1, format, again);
  va_end(again);
  return out;
}

double finite_figure(double v, std::string_view what) {
  if (!std::isfinite(v)) {
    throw RuntimeError(std::string(what) + " came out as " + (std::isnan(v) ? "NaN" : "infinite") +
                       ", not a figure; an input figure is out of any real system's range");
  }
  return v;
}

RateScale rate_scale(const std::string& si_unit) {
  if (si_unit == "FLOP/s") return {1e12, "TFLOP/s"};
  if (si_unit == "bytes/s") return {1e9, "GB/s"};
  if (si_unit == "fraction") return {0.01, "%"};
  return {1, si_unit};
}

std::string human_rate(double v, const std::string& si_unit) {
  const RateScale s = rate_scale(si_unit);
  return strprintf("%.4g %s", v / s.per, s.name.c_str());
}

}  // namespace moebench
