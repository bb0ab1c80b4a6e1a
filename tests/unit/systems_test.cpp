#include "harness/systems/systems.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <set>
#include <string>

#include "harness/core/error.hpp"
#include "harness/output/schema.hpp"
#include "tests/unit/temp_dir.hpp"

using namespace moebench;

namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

std::string usage_message(const std::string& path) {
  try {
    load_system_file(path);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no error)";
}

std::string write(const test::TempDir& dir, const std::string& name, const std::string& text) {
  const std::string path = (dir.path / name).string();
  std::ofstream(path) << text;
  return path;
}

nlohmann::json gb300_renamed(const std::string& name) {
  nlohmann::json doc = find_system("gb300-nvl72").document;
  doc["name"] = name;
  return doc;
}

}  // namespace

TEST_CASE("systems: every built-in one is valid, named once, and cites every figure") {
  const nlohmann::json schema = load_schema(kSystemSchemaFile);
  std::set<std::string> names;
  for (const SystemSpec& s : builtin_systems()) {
    INFO(s.name);
    CHECK(schema_errors(s.document, schema).empty());
    CHECK(names.insert(s.name).second);
    for (const Figure* f : {&s.peak_bf16, &s.peak_fp8, &s.peak_mxfp8, &s.peak_fp32, &s.memory_bytes,
                            &s.memory_bandwidth, &s.nvlink_domain_gpus, &s.nvlink_bandwidth,
                            &s.scale_out_bandwidth, &s.nvlink_latency, &s.scale_out_latency}) {
      CHECK(f->source.size() > 10);
    }
    if (s.generation == "blackwell") {
      CHECK(s.peak_mxfp8.value == s.peak_fp8.value);  // MXFP8 at the FP8 rate
    }
    if (s.generation == "hopper") CHECK_FALSE(s.peak_mxfp8.value.has_value());
    // Every built-in GPU says how many SMs it has, with its source (a user's file may not).
    CHECK(s.sm_count.source.size() > 10);
    CHECK(s.sm_count.value.has_value() == (s.generation != "cpu"));
    CHECK(s.exp_per_s.source.size() > 10);
    CHECK(s.exp_per_s.value.has_value() == (s.generation != "cpu"));
    // And how fast it copies to host memory (the cpu backend's activations are there already).
    CHECK(s.host_link_bandwidth.source.size() > 10);
    CHECK(s.host_link_bandwidth.value.has_value() == (s.generation != "cpu"));
    if (s.generation != "cpu") {
      // Dense FP8 is twice BF16 on Hopper and Blackwell tensor cores.
      CHECK(*s.peak_fp8.value == doctest::Approx(2 * *s.peak_bf16.value).epsilon(0.001));
    }
  }
  // The list: every system NVIDIA's and DeepSeek's rows ran on, and this backend.
  for (const char* n : {"h100-hgx", "h200-hgx", "h800-deepseek", "b200-hgx", "b300-hgx",
                        "gb200-nvl72", "gb300-nvl72", "cpu"}) {
    CHECK(names.count(n) == 1);
  }
}

TEST_CASE("systems: the figures the recipes are judged against, in SI units") {
  const SystemSpec gb300 = find_system("gb300-nvl72");
  CHECK(*gb300.peak_fp8.value == 4900e12);
  CHECK(*gb300.memory_bytes.value == 288e9);
  CHECK(*gb300.nvlink_domain_gpus.value == 72);
  CHECK(*gb300.nvlink_bandwidth.value == 900e9);  // 1.8 TB/s both ways
  CHECK(gb300.nvls);
  const SystemSpec h800 = find_system("h800-deepseek");
  CHECK(*h800.scale_out_bandwidth.value == 50e9);
  const SystemSpec cpu = find_system("cpu");
  CHECK_FALSE(cpu.nvlink_bandwidth.value.has_value());
  CHECK(cpu.peak_fp32.value.has_value());
  CHECK_THROWS_WITH_AS(find_system("gb300"), doctest::Contains("valid: b200-hgx, b300-hgx, cpu"),
                       UsageError);
}

TEST_CASE("systems: figures out of any real system's range are named, in SI units") {
  for (const SystemSpec& s : builtin_systems()) {
    CHECK_MESSAGE(implausible_figure(s).empty(), s.name << ": " << implausible_figure(s));
  }
  SystemSpec h100 = find_system("h100-hgx");
  h100.peak_bf16.value = 989;  // TFLOP/s written as FLOP/s
  CHECK(implausible_figure(h100).find("peak_dense_flops.bf16 is 989 FLOP/s") != std::string::npos);
  h100 = find_system("h100-hgx");
  h100.nvlink_bandwidth.value = 450;  // GB/s written as bytes/s
  CHECK(implausible_figure(h100).find("not GB/s") != std::string::npos);
  h100 = find_system("h100-hgx");
  h100.peak_fp8.value = std::nan("");
  CHECK(implausible_figure(h100).find("peak_dense_flops.fp8") != std::string::npos);
  SystemSpec cpu = find_system("cpu");
  CHECK(implausible_figure(cpu).empty());  // 89.5 GFLOP/s: a CPU's, below a GPU's bound
}

TEST_CASE("systems: the table has a row per system with its per-GPU figures") {
  const std::string t = format_systems(builtin_systems());
  INFO(t);
  CHECK(contains(t, "system          gpu       gen          BF16     FP8   MXFP8"));
  CHECK(
      contains(t, "gb300-nvl72     GB300     blackwell    2450    4900    4900       -      288"));
  CHECK(
      contains(t, "h100-hgx        H100 SXM  hopper        989    1979       -       -       80"));
  CHECK(contains(t, "`--json` gives every figure's source"));
  // The host link's last column: GB300's measured 168.6 GB/s, none on the cpu backend.
  CHECK(contains(t, "yes       100      168.6\n"));
  CHECK(contains(t, "no       9.9          -\n"));
}

TEST_CASE("systems: a user's file is checked, one line naming the field and the fix") {
  test::TempDir dir("moebench-systems");
  const SystemSpec own =
      load_system_file(write(dir, "mine.json", gb300_renamed("my-gb300").dump()));
  CHECK(own.name == "my-gb300");
  CHECK(*own.peak_bf16.value == 2450e12);
  CHECK(find_system((dir.path / "mine.json").string()).name == "my-gb300");  // a path: the file

  nlohmann::json no_source = gb300_renamed("x");
  no_source["memory_bytes"].erase("source");
  CHECK(contains(usage_message(write(dir, "a.json", no_source.dump())), "/memory_bytes"));
  nlohmann::json negative = gb300_renamed("x");
  negative["scale_out_bandwidth_bytes_per_s"]["value"] = -1;
  const std::string m = usage_message(write(dir, "b.json", negative.dump()));
  CHECK(contains(m, "--system "));
  CHECK(contains(m, "/scale_out_bandwidth_bytes_per_s/value"));
  CHECK(contains(m, "reports/system.schema.json"));
  CHECK(m.find('\n') == std::string::npos);
  CHECK(contains(usage_message(write(dir, "c.json", "{\"name\": ")), "not JSON"));
  CHECK(contains(usage_message(write(dir, "d.json", gb300_renamed("gb300-nvl72").dump())),
                 "is a built-in system's"));
  CHECK(contains(usage_message(dir.path.string()), "not a regular file"));
  CHECK(contains(usage_message((dir.path / "none.json").string()), "none.json"));
}
