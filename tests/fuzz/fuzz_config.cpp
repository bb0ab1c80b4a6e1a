// Fuzz target: the model config reader, as `moebench plan --model-config FILE` uses it. The input
// is the file's bytes; a config that is accepted is planned (accounting, memory, the JSON of `plan
// --json`), where UBSan finds any count that leaves int64.
#include <cstdint>
#include <fstream>

#include "harness/cli/commands.hpp"
#include "tests/fuzz/fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace moebench;
  fuzz::setup_once();
  {
    std::ofstream f("config.json", std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  const char* argv[] = {"moebench", "plan", "--model-config", "config.json", "--json"};
  fuzz::usage_errors_only([&] { plan_command(parse_command_line(5, argv)); });
  return 0;
}
