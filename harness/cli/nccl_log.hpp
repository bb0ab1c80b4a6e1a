// NCCL's own log, where it says which transport it used: accept asks NCCL (before it starts) to
// write its INFO lines to a file a rank (NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT,
// NCCL_DEBUG_FILE), and reads the network NCCL chose ("Using network IB") and the connections it
// made ("Channel 00/0 : 0[0] -> 1[1] via P2P/IPC", "... [send] via NET/Socket/0", "... via
// SHM/direct/direct"). NCCL has no API that says so.
#pragma once

#include <istream>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

namespace moebench {

// What one rank's NCCL log says: the network NCCL chose ("IB", "Socket", a plugin's name; "" if
// the log does not say) and how many channel connections went over each transport ("P2P",
// "SHM", "NET/IB", "NET/Socket", "CollNet", "NVLS", ...).
struct NcclTransports {
  std::string network;
  std::map<std::string, int> connections;
};
NcclTransports parse_nccl_transports(std::istream& log);

nlohmann::ordered_json to_json(const NcclTransports& t);
NcclTransports nccl_transports_from_json(const nlohmann::json& j);

// NCCL's log for this process, asked for before NCCL starts: NCCL_DEBUG=INFO,
// NCCL_DEBUG_SUBSYS=INIT and NCCL_DEBUG_FILE in a directory of its own (mkdtemp under TMPDIR,
// else /tmp), removed with what is in it when this object goes, however the job ends. Nothing is
// asked where the user set NCCL_DEBUG, NCCL_DEBUG_SUBSYS or NCCL_DEBUG_FILE (theirs wins) or no
// such directory can be made; why() then says so.
class NcclLogRequest {
 public:
  NcclLogRequest();
  ~NcclLogRequest();
  NcclLogRequest(const NcclLogRequest&) = delete;
  NcclLogRequest& operator=(const NcclLogRequest&) = delete;
  bool requested() const { return !path_.empty(); }
  const std::string& path() const { return path_; }
  const std::string& why() const { return why_; }
  // What the log says so far, as to_json's text; "" where it cannot be read (why() then says so).
  std::string read();

 private:
  std::string dir_, path_, why_;
};

}  // namespace moebench
