// NVLink domains: keys to indices, emulated domains, and the expert groups that span two.
#include "harness/parallel/domains.hpp"

#include <doctest/doctest.h>

#include "harness/core/error.hpp"

namespace moebench {
namespace {

TEST_CASE("domains: keys in order of first appearance; emulated blocks") {
  CHECK(domains_from_keys({"b", "b", "a", "b", "c"}) == std::vector<int>{0, 0, 1, 0, 2});
  CHECK(emulated_domains(8, 4) == std::vector<int>{0, 0, 0, 0, 1, 1, 1, 1});
  CHECK_THROWS_AS(emulated_domains(8, 3), RuntimeError);
}

TEST_CASE("domains: an NVL72-like domain of 72 with EP 32 splits the third expert group") {
  // 144 ranks in two domains of 72 with EP 8: 72 = 9 x 8, every group inside one domain; with
  // EP 16 (72 = 4.5 x 16) group 4, ranks 64-79, spans both.
  CHECK(
      straddling_expert_groups(ParallelGrid(144, GridShape{1, 1, 8, 1}), emulated_domains(144, 72))
          .empty());
  const std::vector<std::string> ep16 = straddling_expert_groups(
      ParallelGrid(144, GridShape{1, 1, 16, 1}), emulated_domains(144, 72));
  REQUIRE(ep16.size() == 1);
  CHECK(ep16[0].find("world ranks 64-79") != std::string::npos);
  // 128 ranks, the first 72 in one domain; EP groups of 32 consecutive ranks: 64-95 spans both.
  const ParallelGrid ep32(128, GridShape{1, 1, 32, 1});
  std::vector<int> domains(128);
  for (int r = 0; r < 128; ++r) domains[static_cast<std::size_t>(r)] = r < 72 ? 0 : 1;
  const std::vector<std::string> w = straddling_expert_groups(ep32, domains);
  REQUIRE(w.size() == 1);
  CHECK(w[0].find("expert group 2 (world ranks 64-95) spans NVLink domains 0, 1") == 0);
  CHECK(w[0].find("multiple of --ep (32)") != std::string::npos);
  // Domains of 64: every group inside one.
  CHECK(straddling_expert_groups(ep32, emulated_domains(128, 64)).empty());
}

TEST_CASE("domains: a group larger than a domain spans domains by design: no warning") {
  // EP 32 over 8-GPU nodes, as the published H100 rows run.
  CHECK(straddling_expert_groups(ParallelGrid(64, GridShape{1, 1, 32, 1}), emulated_domains(64, 8))
            .empty());
  // EP 4 in domains of 6: the second group, ranks 4-7, could fit in one but straddles.
  const std::vector<std::string> w =
      straddling_expert_groups(ParallelGrid(12, GridShape{1, 1, 4, 1}), emulated_domains(12, 6));
  REQUIRE(w.size() == 1);
  CHECK(w[0].find("expert group 1 (world ranks 4-7)") == 0);
}

TEST_CASE("domains: many straddling groups are listed up to the limit, then counted") {
  const ParallelGrid grid(16, GridShape{1, 1, 4, 1});
  const std::vector<int> alternating = {0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1};
  const std::vector<std::string> w = straddling_expert_groups(grid, alternating, 2);
  REQUIRE(w.size() == 3);
  CHECK(w[2] == "and 2 more expert groups like it");
}

}  // namespace
}  // namespace moebench
