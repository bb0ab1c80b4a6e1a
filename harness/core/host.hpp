// The name of the host this process runs on, for messages and reports.
#pragma once

#include <string>

namespace moebench {

// gethostname(), or "unknown" when it fails.
std::string host_name();

}  // namespace moebench
