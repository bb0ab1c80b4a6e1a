// identify_rank joins the per-rank results with the device records; describe() names the GPU
// only where there is one.
#include "harness/output/rank_identity.hpp"

#include <doctest/doctest.h>

namespace moebench {
namespace {

TEST_CASE("rank identity: host and local rank from the results, the GPU from its record") {
  RunRecord r;
  RankResult a;
  a.rank = 0;
  a.host = "node-a";
  RankResult b;
  b.rank = 1;
  b.host = "node-b";
  b.node = 1;
  b.local_rank = 3;
  r.results.per_rank = {a, b};
  const RankIdentity cpu = identify_rank(r, 1);
  CHECK(cpu.host == "node-b");
  CHECK(cpu.node == 1);
  CHECK(cpu.local_rank == 3);
  CHECK(cpu.gpu_index == -1);
  CHECK(describe(cpu) == "rank 1 (host node-b, local rank 3)");

  DeviceRecord d;
  d.rank = 1;
  d.host = "node-b";
  d.info.ordinal = 3;
  d.info.uuid = "GPU-1234";
  d.info.pci_bus_id = "0000:19:00.0";
  r.meta.devices = {d};
  const RankIdentity gpu = identify_rank(r, 1);
  CHECK(gpu.gpu_index == 3);
  CHECK(gpu.uuid == "GPU-1234");
  CHECK(gpu.pci_bus_id == "0000:19:00.0");
  CHECK(describe(gpu) == "rank 1 (host node-b, local rank 3, GPU 3 GPU-1234 0000:19:00.0)");
  CHECK(identify_rank(r, 0).gpu_index == -1);  // no record for rank 0
}

}  // namespace
}  // namespace moebench
