// accept's NVML inventory judged on hand-made GPUs: a clean fleet passes rank by rank, an ECC
// error or a pending row remapping fails its rank whatever the others say, a setting that
// differs from its model's majority (a power limit, NVLinks down, a narrow PCIe slot) fails its
// rank naming both values, and no NVML anywhere is one check that fails nothing. Also the JSON
// round trip accept-merge relies on.
#include "harness/cli/accept_nvml.hpp"

#include <doctest/doctest.h>

#include "tests/unit/accept_fixture.hpp"

namespace moebench {
namespace {

NvmlInventory h100() {
  NvmlInventory g;
  g.name = "NVIDIA H100 80GB HBM3";
  g.uuid = "GPU-1";
  g.power_limit_w = 700;
  g.sm_clock_max_mhz = 1980;
  g.ecc_uncorrected = 0;
  g.remap_pending = false;
  g.remap_failed = false;
  g.nvlinks_up = 18;
  g.nvlinks = 18;
  g.pcie_max_gen = 5;
  g.pcie_max_width = 16;
  return g;
}

TEST_CASE("accept nvml: health counters fail their rank, settings against the model's majority") {
  std::vector<std::optional<NvmlInventory>> gpus(4, h100());
  CHECK(judge_nvml(accept_ranks(4), gpus, "").size() == 4);
  for (const AcceptCheck& c : judge_nvml(accept_ranks(4), gpus, "")) CHECK(c.status == "pass");
  gpus[3]->ecc_uncorrected = 2;
  gpus[1]->power_limit_w = 500;
  gpus[2]->nvlinks_up = 16;
  gpus[0]->remap_pending = true;
  const std::vector<AcceptCheck> c = judge_nvml(accept_ranks(4), gpus, "");
  REQUIRE(c.size() == 4);
  CHECK(c[3].status == "fail");
  CHECK(c[3].reason.find("2 uncorrected ECC errors") != std::string::npos);
  CHECK(c[3].node == 1);
  CHECK(c[1].reason.find("power limit 500 W where 3 of the 4 NVIDIA H100 80GB HBM3 GPUs have "
                         "700 W") != std::string::npos);
  CHECK(c[2].reason.find("NVLinks up 16 where 3 of the 4") != std::string::npos);
  CHECK(c[0].reason.find("row remapping is pending") != std::string::npos);
  // Two against two: no majority, no setting finding (the counters still fail on their own).
  std::vector<std::optional<NvmlInventory>> split(4, h100());
  split[0]->power_limit_w = split[1]->power_limit_w = 500;
  for (const AcceptCheck& x : judge_nvml(accept_ranks(4), split, "")) CHECK(x.status == "pass");
}

TEST_CASE("accept nvml: no NVML on any rank is one check that fails nothing") {
  const std::vector<AcceptCheck> c = judge_nvml(accept_ranks(2), {std::nullopt, std::nullopt},
                                                "libnvidia-ml.so.1 cannot be loaded");
  REQUIRE(c.size() == 1);
  CHECK(c[0].status == "info");
  CHECK(c[0].reason.find("cannot be loaded") != std::string::npos);
}

TEST_CASE("accept nvml: the inventory's JSON reads back as it was, unknown fields null") {
  NvmlInventory g = h100();
  g.mem_clock_max_mhz.reset();
  const NvmlInventory back = nvml_inventory_from_json(nlohmann::json(to_json(g)));
  CHECK(back.name == g.name);
  CHECK(back.power_limit_w == 700);
  CHECK(back.nvlinks_up == 18);
  CHECK_FALSE(back.mem_clock_max_mhz);
  CHECK(to_json(g)["mem_clock_max_mhz"].is_null());
}

}  // namespace
}  // namespace moebench
