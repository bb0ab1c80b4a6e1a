// NCCL's own log, where it says which transport it used: accept asks NCCL (before it starts) to
// write its INFO lines to a file a rank (NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT,
// NCCL_DEBUG_FILE), and reads the network NCCL chose ("Using network IB") and the connections it
// made ("Channel 00/0 : 0[0] -> 1[1] via P2P/IPC", "... [send] via NET/Socket/0", "... via
// SHM/direct/direct"). NCCL has no API that says so.
#pragma once

#include <istream>
#include <map>
#include <optional>
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

// Before NCCL starts on this rank: where its log will be (NCCL_DEBUG_FILE, under TMPDIR or
// /tmp, named for the host and process), or nullopt where the user set NCCL_DEBUG,
// NCCL_DEBUG_SUBSYS or NCCL_DEBUG_FILE (theirs wins; `why` says so).
std::optional<std::string> request_nccl_log(std::string& why);

// The log at `path` parsed, as JSON text (to_json), and the file removed; "" where it cannot be
// read (`why` then says so).
std::string read_nccl_log(const std::string& path, std::string& why);

}  // namespace moebench
