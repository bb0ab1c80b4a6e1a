// The PNGs, drawn by the scripts of reports/ (python3 with matplotlib) from a JSON report.
#pragma once

#include <string>

namespace moebench {

// Runs reports/<script_name> on json_path to draw png. A missing matplotlib (or python) is not a
// failure of the command: its other outputs are written, its exit code stays its own, and the
// message says how to install it and how to draw the plot later (unless the JSON is a temporary
// file). Returns whether the PNG was drawn. MOEBENCH_PYTHON names the interpreter, else
// /usr/bin/python3, else python3 on the PATH.
bool draw_plot(const std::string& script_name, const std::string& json_path, const std::string& png,
               bool json_is_temporary);

}  // namespace moebench
