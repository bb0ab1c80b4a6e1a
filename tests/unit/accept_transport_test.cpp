// accept's judgement of NCCL's transports: IB across nodes and P2P within them pass on an HGX
// system; one rank whose NCCL fell back to sockets fails alone, naming its node; every rank on
// sockets alike is one check of the cluster's (a setting, not a node); SHM between GPUs where
// NVLink is expected fails; sockets within one node, or on a system without a fast network, are
// no finding; no log at all is one info check with the reason, one rank's unread log its own.
#include "harness/cli/accept_transport.hpp"

#include <doctest/doctest.h>

#include "tests/unit/accept_fixture.hpp"

namespace moebench {
namespace {

NcclTransports over(const std::string& network, std::map<std::string, int> connections) {
  return {network, std::move(connections)};
}

const TransportExpectation kHgx{true, true, 50e9};  // two nodes, NVLink, 400 Gb/s a GPU

TEST_CASE("accept transport: a socket fallback fails its rank, or the cluster when everywhere") {
  const NcclTransports good = over("IB", {{"P2P", 8}, {"NET/IB", 4}});
  std::vector<std::optional<NcclTransports>> seen(4, good);
  std::vector<AcceptCheck> checks = judge_transports(accept_ranks(4), seen, kHgx, {});
  REQUIRE(checks.size() == 4);
  for (const AcceptCheck& c : checks) {
    CAPTURE(c.reason);
    CHECK(c.status == "pass");
    CHECK(c.name == "collective_transport");
    CHECK(c.reason.find("network IB; connections: NET/IB 4, P2P 8") != std::string::npos);
  }
  seen[3] = over("Socket", {{"P2P", 8}, {"NET/Socket", 4}});
  checks = judge_transports(accept_ranks(4), seen, kHgx, {});
  REQUIRE(checks.size() == 4);
  CHECK(checks[3].status == "fail");
  CHECK(checks[3].node == 1);
  CHECK(checks[3].reason.find("TCP sockets") != std::string::npos);
  CHECK(checks[3].reason.find("50 GB/s") != std::string::npos);
  for (int i = 0; i < 3; ++i) CHECK(checks[static_cast<std::size_t>(i)].status == "pass");
  // Every rank on sockets alike: one check, no node.
  std::vector<std::optional<NcclTransports>> all(4, seen[3]);
  checks = judge_transports(accept_ranks(4), all, kHgx, {});
  REQUIRE(checks.size() == 1);
  CHECK(checks[0].status == "fail");
  CHECK(checks[0].node == -1);
  CHECK(checks[0].reason.find("every rank: NCCL crossed nodes over TCP sockets") == 0);
}

TEST_CASE("accept transport: SHM where NVLink is expected; what is not expected is no finding") {
  std::vector<std::optional<NcclTransports>> seen(4, over("IB", {{"P2P", 8}, {"NET/IB", 4}}));
  seen[1] = over("IB", {{"SHM", 8}, {"NET/IB", 4}});
  std::vector<AcceptCheck> checks = judge_transports(accept_ranks(4), seen, kHgx, {});
  CHECK(checks[1].status == "fail");
  CHECK(checks[1].reason.find("host memory (8 connection(s) via SHM)") != std::string::npos);
  // One node (no network crosses), a system without NVLink and without a fast network: sockets
  // and SHM are what it has.
  std::vector<std::optional<NcclTransports>> plain(4, over("Socket", {{"SHM", 4}}));
  checks = judge_transports(accept_ranks(4), plain, {true, false, 1e9}, {});
  for (const AcceptCheck& c : checks) CHECK(c.status == "pass");
  checks = judge_transports(accept_ranks(4), plain, {false, false, 50e9}, {});
  for (const AcceptCheck& c : checks) CHECK(c.status == "pass");
}

TEST_CASE("accept transport: no log read is one info check saying why") {
  const std::vector<std::optional<NcclTransports>> none(4);
  const std::vector<std::string> mpi(4, "the collectives run over MPI, not NCCL");
  const std::vector<AcceptCheck> checks = judge_transports(accept_ranks(4), none, kHgx, mpi);
  REQUIRE(checks.size() == 1);
  CHECK(checks[0].status == "info");
  CHECK(checks[0].reason.find("over MPI") != std::string::npos);
  // One rank's log unread among read ones: its own info check, with its reason.
  std::vector<std::optional<NcclTransports>> some(4, over("IB", {{"P2P", 8}, {"NET/IB", 4}}));
  some[2].reset();
  const std::vector<AcceptCheck> mixed =
      judge_transports(accept_ranks(4), some, kHgx, {"", "", "NCCL wrote no log at /x", ""});
  REQUIRE(mixed.size() == 4);
  CHECK(mixed[2].status == "info");
  CHECK(mixed[2].rank == 2);
  CHECK(mixed[2].reason.find("NCCL wrote no log at /x") != std::string::npos);
  CHECK(mixed[0].status == "pass");
}

}  // namespace
}  // namespace moebench
