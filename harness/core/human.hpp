// Units for people: what a message or a table prints. Everything inside stays in SI base units.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace moebench {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// "12.35 GiB" (digits after the point as given).
std::string format_gib(double bytes, int digits = 2);
// The values from 1 to limit that divide every number in `of`, "1, 2, 4": what a usage error
// lists as the valid sizes of a layout.
std::string common_divisors(std::int64_t limit, std::initializer_list<std::int64_t> of);
// The current time as ISO 8601 in UTC, e.g. "2026-11-30T18:21:48Z".
std::string iso_time_utc();

// printf-style text of any length (no fixed buffer to cut a number or glue a row to the next).
std::string strprintf(const char* format, ...) __attribute__((format(printf, 1, 2)));
// `v` itself, or RuntimeError naming `what` when it is infinite or NaN: where a figure is
// formatted for a person or a file, so that none that is not a number reaches either.
double finite_figure(double v, std::string_view what);

// A rate for people: FLOP/s in TFLOP/s, bytes/s in GB/s (any other unit as it is).
struct RateScale {
  double per = 1;    // SI units in one of `name`
  std::string name;  // "TFLOP/s", "GB/s", "%" (of a fraction)
};
RateScale rate_scale(const std::string& si_unit);
// "1.234 TFLOP/s", "812.3 GB/s": four significant digits.
std::string human_rate(double v, const std::string& si_unit);

// The items one after another with `sep` between them ("" for none).
std::string join(const std::vector<std::string>& items, std::string_view sep);

}  // namespace moebench
