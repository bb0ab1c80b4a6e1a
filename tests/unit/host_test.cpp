#include "harness/core/host.hpp"

#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

using namespace moebench;

TEST_CASE("host_name is the kernel's host name") {
  char buf[256] = {};
  REQUIRE(gethostname(buf, sizeof buf - 1) == 0);
  CHECK(host_name() == buf);
  CHECK(!host_name().empty());
}

TEST_CASE("recorded_environment keeps the variables that shape a run, sorted and bounded") {
  const std::string long_value(5000, 'x');
  const std::string long_entry = "NCCL_LONG=" + long_value;
  const char* envp[] = {"SLURM_JOB_ID=42",
                        "HOME=/root",
                        "NCCL_IB_HCA=mlx5_0",
                        "UCX_TLS=rc",
                        "OMP_NUM_THREADS=1",
                        "OMPI_MCA_pml=ucx",
                        "CUDA_VISIBLE_DEVICES=0,1",
                        "PATH=/bin",
                        "NOEQUALS",
                        "=empty",
                        "PMIX_RANK=0",
                        "OMP_PROC_BIND=true",
                        long_entry.c_str(),
                        nullptr};
  const auto env = recorded_environment(envp);
  std::vector<std::string> names;
  for (const auto& [k, v] : env) names.push_back(k);
  CHECK(names == std::vector<std::string>{"CUDA_VISIBLE_DEVICES", "NCCL_IB_HCA", "NCCL_LONG",
                                          "OMPI_MCA_pml", "OMP_NUM_THREADS", "PMIX_RANK",
                                          "SLURM_JOB_ID", "UCX_TLS"});
  CHECK(env[0].second == "0,1");
  CHECK(env[2].second.size() == kMaxRecordedValue + 3);
  CHECK(env[2].second.ends_with("..."));
  CHECK(recorded_environment(nullptr).empty());

  std::vector<std::string> many;
  for (std::size_t i = 0; i < kMaxRecordedVariables + 10; ++i) {
    many.push_back("SLURM_V" + std::to_string(100000 + i) + "=1");
  }
  std::vector<const char*> p;
  for (const std::string& m : many) p.push_back(m.c_str());
  p.push_back(nullptr);
  CHECK(recorded_environment(p.data()).size() == kMaxRecordedVariables);
}

TEST_CASE("resident_memory reads this process's resident set and its high-water mark") {
  const ResidentMemory before = resident_memory();
  CHECK(before.now_bytes > 0);
  CHECK(before.peak_bytes >= before.now_bytes);
  // 64 MiB touched page by page must show in the resident set (the machine has far more free).
  std::vector<char> big(64u << 20);
  for (std::size_t i = 0; i < big.size(); i += 4096) big[i] = 1;
  const ResidentMemory after = resident_memory();
  CHECK(after.now_bytes >= before.now_bytes + 32.0 * (1 << 20));
  CHECK(after.peak_bytes >= after.now_bytes);
  CHECK(big[4096] == 1);
}

TEST_CASE("loaded_libraries names the libraries this process loaded, by prefix") {
  // doctest's binary links the C library dynamically: libc.so.6 is mapped.
  const std::vector<std::string> libc = loaded_libraries({"libc."});
  REQUIRE(!libc.empty());
  CHECK(libc.front().front() == '/');
  CHECK(libc.front().find("/libc.so") != std::string::npos);
  CHECK(loaded_libraries({"libno-such-library-here"}).empty());
  // Sorted, each once, though a library maps several segments.
  const std::vector<std::string> some = loaded_libraries({"libc.", "libm.", "libstdc++"});
  CHECK(std::is_sorted(some.begin(), some.end()));
  CHECK(std::adjacent_find(some.begin(), some.end()) == some.end());
}

TEST_CASE("host_memory_available_bytes reads MemAvailable") {
  CHECK(host_memory_available_bytes() > 0);
}
