// NCCL's log read for its transports, on lines in the formats NCCL 2.x writes (its INFO lines as
// users post them: ring and tree connections over P2P, SHM, IB and sockets, a plugin's network,
// GPUDirect RDMA's suffix, lines of other kinds between them); the JSON round trip accept-merge
// relies on; and the request, which leaves a user's own NCCL_DEBUG settings alone.
#include "harness/cli/nccl_log.hpp"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <doctest/doctest.h>

namespace moebench {
namespace {

NcclTransports parse(const std::string& text) {
  std::istringstream in(text);
  return parse_nccl_transports(in);
}

TEST_CASE("nccl log: the network and each connection's transport") {
  const NcclTransports ib = parse(
      "gpu01:1234:1290 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to ib0\n"
      "gpu01:1234:1290 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB\n"
      "gpu01:1234:1290 [0] NCCL INFO Using network IB\n"
      "gpu01:1234:1290 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read\n"
      "gpu01:1234:1290 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] via P2P/CUMEM/read\n"
      "gpu01:1234:1290 [0] NCCL INFO Channel 00/0 : 7[7] -> 8[0] [send] via NET/IB/0/GDRDMA\n"
      "gpu01:1234:1290 [0] NCCL INFO Channel 01/0 : 15[7] -> 0[0] [receive] via NET/IB/1\n"
      "gpu01:1234:1290 [0] NCCL INFO Connected all rings\n"
      "gpu01:1234:1290 [0] NCCL INFO 2 coll channels, 0 nvls channels, 2 p2p channels\n");
  CHECK(ib.network == "IB");
  CHECK(ib.connections.size() == 2);
  CHECK(ib.connections.at("P2P") == 2);
  CHECK(ib.connections.at("NET/IB") == 2);

  const NcclTransports sockets = parse(
      "node0:13571:13571 [0] NCCL INFO NET/IB : No device found.\n"
      "node0:13571:13571 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>\n"
      "node0:13571:13571 [0] NCCL INFO Using network Socket\n"
      "node0:13571:13571 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0\n"
      "node0:13571:13571 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[0] [send] via NET/Socket/0\n"
      "node0:13571:13571 [0] NCCL INFO Channel 00 : 2[1] -> 0[0] via SHM/direct/direct\n");
  CHECK(sockets.network == "Socket");
  CHECK(sockets.connections.at("NET/Socket") == 2);
  CHECK(sockets.connections.at("SHM") == 1);

  // A network plugin's name, with spaces, as NCCL prints it.
  const NcclTransports efa = parse(
      "ip-10-0-0-1:77:77 [3] NCCL INFO Using network AWS Libfabric\n"
      "ip-10-0-0-1:77:90 [3] NCCL INFO Channel 00/0 : 3[3] -> 11[3] [send] via NET/AWS "
      "Libfabric/3/GDRDMA\n");
  CHECK(efa.network == "AWS Libfabric");
  CHECK(efa.connections.size() == 1);
  CHECK(efa.connections.begin()->first == "NET/AWS Libfabric");

  // Nothing NCCL said about transports: nothing known.
  const NcclTransports none = parse("host:1:1 [0] NCCL INFO Bootstrap : Using eth0\n");
  CHECK(none.network.empty());
  CHECK(none.connections.empty());
}

TEST_CASE("nccl log: through JSON and back") {
  NcclTransports t;
  t.network = "IB";
  t.connections = {{"P2P", 24}, {"NET/IB", 8}};
  const NcclTransports back = nccl_transports_from_json(nlohmann::json::parse(to_json(t).dump()));
  CHECK(back.network == "IB");
  CHECK(back.connections == t.connections);
  const NcclTransports unnamed = nccl_transports_from_json(to_json(NcclTransports{}));
  CHECK(unnamed.network.empty());
  CHECK(unnamed.connections.empty());
}

TEST_CASE("nccl log: the request sets NCCL's debug variables, but never over a user's") {
  for (const char* v : {"NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE"}) unsetenv(v);
  std::string dir;
  {
    NcclLogRequest log;
    REQUIRE(log.requested());
    CHECK(std::string(std::getenv("NCCL_DEBUG")) == "INFO");
    CHECK(std::string(std::getenv("NCCL_DEBUG_SUBSYS")) == "INIT");
    CHECK(std::string(std::getenv("NCCL_DEBUG_FILE")) == log.path());
    dir = log.path().substr(0, log.path().rfind('/'));
    CHECK(dir.find("moebench-nccl-") != std::string::npos);
    // Its own directory, for this user alone.
    struct stat st {};
    REQUIRE(stat(dir.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0700);
    // Nothing written yet: nothing read, and why.
    CHECK(log.read().empty());
    CHECK(log.why().find("no log") != std::string::npos);
    // What NCCL writes is read.
    std::ofstream(log.path()) << "h:1:1 [0] NCCL INFO Using network IB\n";
    const std::string text = log.read();
    REQUIRE(!text.empty());
    CHECK(nccl_transports_from_json(nlohmann::json::parse(text)).network == "IB");
  }
  // Gone with the request, however the job ends.
  struct stat gone {};
  CHECK(stat(dir.c_str(), &gone) != 0);
  // A user's NCCL_DEBUG=WARN: theirs, untouched, and the reason says so.
  for (const char* v : {"NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE"}) unsetenv(v);
  setenv("NCCL_DEBUG", "WARN", 1);
  NcclLogRequest theirs;
  CHECK(!theirs.requested());
  CHECK(theirs.why().find("NCCL_DEBUG is set (WARN)") == 0);
  CHECK(theirs.read().empty());
  CHECK(std::string(std::getenv("NCCL_DEBUG")) == "WARN");
  CHECK(std::getenv("NCCL_DEBUG_FILE") == nullptr);
  unsetenv("NCCL_DEBUG");
}

}  // namespace
}  // namespace moebench
