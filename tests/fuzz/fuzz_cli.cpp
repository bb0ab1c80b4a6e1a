// Fuzz target: the command line. The input is the arguments, one per line; they are parsed, and
// what would then be resolved is: `plan` plans (without writing --out), `run` resolves its
// configuration for 1 to 64 ranks (the first byte picks), the listing commands list. Arguments
// that name a path outside the private working folder (any "/") are not run: the fuzzer would
// read whatever file it named.
#include <cstdint>
#include <string>
#include <vector>

#include "harness/cli/commands.hpp"
#include "tests/fuzz/fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace moebench;
  fuzz::setup_once();
  if (size == 0) return 0;
  const int world = 1 + data[0] % 64;
  const std::string text = fuzz::text_of(data + 1, size - 1);
  if (text.find('/') != std::string::npos) return 0;
  std::vector<std::string> args = {"moebench"};
  std::string::size_type start = 0;
  while (start <= text.size() && args.size() < 64) {
    const auto end = text.find('\n', start);
    args.push_back(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  fuzz::usage_errors_only([&] {
    CliOptions o = parse_command_line(static_cast<int>(argv.size()), argv.data());
    switch (o.command) {
      case Command::plan:
        o.out.clear();
        plan_command(o);
        break;
      case Command::run:
        resolve_run_config(o, world);
        break;
      case Command::phases:
        phases_command(o);
        break;
      case Command::recipes:
        recipes_command(o);
        break;
      default:  // help, version and presets print; validate, report and bench read files
        break;
    }
  });
  return 0;
}
