#include "harness/cli/nccl_log.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <regex>

namespace moebench {

NcclTransports parse_nccl_transports(std::istream& log) {
  // "NCCL INFO Using network IB" (the network NCCL chose); "Channel 00/0 : 0[0] -> 1[1] [send]
  // via NET/IB/0/GDRDMA", "Channel 01 : 2[1] -> 0[0] via SHM/direct/direct", "... via P2P/IPC/read"
  // (a connection, its transport the first one or two words after "via").
  static const std::regex network(R"(NCCL INFO Using network (.+?)\s*$)");
  static const std::regex channel(
      R"(NCCL INFO Channel \d+(/\d+)? : .* via ([A-Za-z0-9]+)(/([^/]+))?)");
  NcclTransports t;
  std::string line;
  std::smatch m;
  while (std::getline(log, line)) {
    if (std::regex_search(line, m, network)) {
      t.network = m[1];
    } else if (std::regex_search(line, m, channel)) {
      const std::string kind = m[2];
      ++t.connections[kind == "NET" && m[4].matched ? "NET/" + m[4].str() : kind];
    }
  }
  return t;
}

nlohmann::ordered_json to_json(const NcclTransports& t) {
  nlohmann::ordered_json c = nlohmann::ordered_json::object();
  for (const auto& [k, n] : t.connections) c[k] = n;
  return {
      {"network", t.network.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(t.network)},
      {"connections", c}};
}

NcclTransports nccl_transports_from_json(const nlohmann::json& j) {
  NcclTransports t;
  if (j.contains("network") && j["network"].is_string()) t.network = j["network"];
  for (const auto& [k, n] : j.at("connections").items()) t.connections[k] = n.get<int>();
  return t;
}

NcclLogRequest::NcclLogRequest() {
  for (const char* v : {"NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE"}) {
    if (const char* set = std::getenv(v); set != nullptr && *set != '\0') {
      why_ = std::string(v) + " is set (" + set + "): NCCL's log is the user's, not read";
      return;
    }
  }
  // A directory of this process's own (mode 0700): NCCL opens its file with fopen, which would
  // follow a link another user left at a predictable name.
  const char* tmp = std::getenv("TMPDIR");
  std::string dir =
      std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/moebench-nccl-XXXXXX";
  if (mkdtemp(dir.data()) == nullptr) {
    why_ = "no directory for NCCL's log could be made as " + dir + " (" + std::strerror(errno) +
           "): NCCL's transports not read";
    return;
  }
  dir_ = dir;
  path_ = dir_ + "/nccl.log";
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("NCCL_DEBUG_SUBSYS", "INIT", 1);
  setenv("NCCL_DEBUG_FILE", path_.c_str(), 1);
}

NcclLogRequest::~NcclLogRequest() {
  if (dir_.empty()) return;
  std::remove(path_.c_str());
  rmdir(dir_.c_str());
}

std::string NcclLogRequest::read() {
  if (path_.empty()) return std::string();
  std::ifstream f(path_);
  if (!f) {
    why_ = "NCCL wrote no log at " + path_;
    return std::string();
  }
  return to_json(parse_nccl_transports(f)).dump();
}

}  // namespace moebench
