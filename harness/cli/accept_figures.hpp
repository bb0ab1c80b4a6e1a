// What a GPU must reach in `moebench accept`, where the site says so rather than the system
// description: --floors FILE (the site's own minimum figures) or --baseline FILE (a known-good
// node's accept.json: its ranks' median figures, per SKU).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace moebench {

// The figures `accept` judges per rank (larger is better): gemm_rate (FLOP/s) and
// memory_bandwidth (bytes/s).
// The per-rank rates of accept's GPU stage that a site's figures may set.
inline constexpr const char* kRateFigures[] = {"gemm_rate", "grouped_gemm_rate", "attention_rate",
                                               "memory_bandwidth"};

struct SiteFigures {
  std::map<std::string, std::map<std::string, double>> value;  // figure -> SKU ("": any) -> value
  std::string source;   // for the checks' source: the file and what the values are
  bool floors = false;  // the values are floors themselves (x 1), not expected figures (x --floor)
  // --baseline: what its figures were measured with, which a run must match to be judged.
  std::optional<std::int64_t> gemm_n;
  std::string backend;
};

// UsageError when the run measures its GEMM at another size or on another backend than the
// baseline did.
void check_site_comparable(const SiteFigures& f, std::int64_t gemm_n, const std::string& backend);

// --floors FILE: {"gemm_rate": 6.0e14, "memory_bandwidth": 3.6e12, "source": "..."} (either
// figure may be left out; reports/floors.schema.json). UsageError naming the file and what is
// wrong.
SiteFigures read_floors(const std::string& path);

// --baseline FILE: an accept.json; each figure's median over the baseline's ranks of each SKU.
SiteFigures read_baseline(const std::string& path);

// The value a SKU's ranks are held to for one figure, if the site gave one: the SKU's own, or
// the one for any SKU.
std::optional<double> site_value(const SiteFigures& f, const std::string& figure,
                                 const std::string& sku);

// Before the GPU stage: UsageError when a figure the baseline gives has no value for one of the
// run's SKUs (a baseline of another GPU model).
void check_site_skus(const SiteFigures& f, const std::vector<std::string>& skus);

}  // namespace moebench
