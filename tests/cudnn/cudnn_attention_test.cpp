// cuDNN attention's graphs (harness/backends/cudnn/cudnn_attention.cpp) against cudnn-frontend's
// own validation, on the host: the frontend's validate() runs its support checks against the
// cuDNN library this process loaded and the compute capability it is given, without a device,
// a handle or any data. The views are the ones the cuda backend hands over
// (harness/backends/cuda/attention_packed.cuh): q and the output as column slices of the step's
// matrices (all heads wide), k and v gathered into packed chunks, the statistics packed
// [batch, heads, seq, 1]. A refusal here would send every such call to the batched GEMMs (auto)
// or fail it (--attention-impl cudnn) on the GPU, so this is the check that cuDNN takes them.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "harness/backends/cudnn/cudnn_attention.hpp"
#include "harness/core/host.hpp"

namespace moebench {
namespace {

// A view's shape only: validate() reads no data.
Mat view(std::int64_t rows, std::int64_t cols, std::int64_t ld) {
  return Mat{nullptr, rows, cols, ld, DType::bf16};
}

struct Case {
  const char* what;
  std::int64_t batch, seq, heads_total, chunk, qk, vd;
  bool causal;
};

// q and out: the chunk's columns of the step's all-heads matrices; k and v: packed chunks.
std::string validate(const Case& c, int sm) {
  const AttentionShape s{
      c.batch, c.seq, c.chunk, c.qk, c.vd, 1.0f / std::sqrt(static_cast<float>(c.qk)), c.causal};
  const std::int64_t rows = c.batch * c.seq;
  return CudnnAttention::validate(s, view(rows, c.chunk * c.qk, c.heads_total * c.qk),
                                  view(rows, c.chunk * c.qk, c.chunk * c.qk),
                                  view(rows, c.chunk * c.vd, c.chunk * c.vd),
                                  view(rows, c.chunk * c.vd, c.heads_total * c.vd), sm);
}

// The SMs to validate for: the GPU's in hand (tests/device/check.sh sets MOEBENCH_TEST_SM from
// nvidia-smi, e.g. 90 on an H200), so that a refusal for another architecture, which that
// machine's cuDNN may not know, does not fail its check; without one, Hopper's and Blackwell's.
std::vector<int> target_sms() {
  const char* given = std::getenv("MOEBENCH_TEST_SM");
  if (given != nullptr && *given != '\0') {
    const int sm = std::atoi(given);
    REQUIRE_MESSAGE(sm >= 50, "MOEBENCH_TEST_SM=" << given << ": give an SM such as 90");
    return {sm};
  }
  return {90, 100};
}

TEST_CASE("cuDNN attention graphs: MLA's 192/128 heads pass cudnn-frontend's validation") {
  MESSAGE("against " << CudnnAttention::versions());
  const Case cases[] = {
      // moebench bench's layer: DeepSeek-V3's 128 heads of one 4096-token sequence.
      {"bench: 128 heads, 4096 tokens", 1, 4096, 128, 128, 192, 128, true},
      // tests/device/check.sh's runs: 512-token sequences, all heads, and a chunk of them.
      {"check: 128 heads, 512 tokens", 1, 512, 128, 128, 192, 128, true},
      {"a chunk of 8 of 128 heads", 2, 512, 128, 8, 192, 128, true},
      {"one head, not causal", 1, 256, 128, 1, 192, 128, false},
      // The GPU tests' shapes (tests/gpu/cuda_compute_test.cpp).
      {"gpu tests: 3 heads, 48 tokens", 2, 48, 3, 3, 192, 128, true},
      {"gpu tests: 16 heads, 40 tokens, 1 a chunk", 2, 40, 16, 1, 192, 128, false},
  };
  for (int sm : target_sms()) {
    for (const Case& c : cases) {
      const std::string what = c.what;
      CAPTURE(sm);
      CAPTURE(what);
      const std::string why = validate(c, sm);
      INFO("cudnn-frontend: " << why);
      CHECK(why.empty());
    }
  }
  // cuDNN 9 loads its graph and engine libraries by name when first used: where they resolved
  // (tests/device/summarize.py reads this line into summary.json's cudnn.loaded).
  const std::vector<std::string> loaded = loaded_libraries({"libcudnn", "libnvrtc"});
  std::string list;
  for (const std::string& l : loaded) list += (list.empty() ? "" : ", ") + l;
  MESSAGE("cudnn libraries loaded: " << list);
  const auto has = [&](const char* name) {
    return std::any_of(loaded.begin(), loaded.end(),
                       [&](const std::string& l) { return l.find(name) != std::string::npos; });
  };
  CHECK_MESSAGE(has("libcudnn_graph"), "cuDNN's graph library did not load: " << list);
}

// The same check refuses what cuDNN cannot run, so a pass above means something: head dims that
// are not a multiple of 8 have no flash attention kernel.
TEST_CASE("cuDNN attention graphs: a head dim cuDNN has no kernel for is refused") {
  const Case odd{"12/6 head dims", 1, 64, 4, 4, 12, 6, true};
  const std::string why = validate(odd, 90);
  MESSAGE("cudnn-frontend: " << why);
  CHECK_FALSE(why.empty());
  // Refused for the shape, on the host: not for want of a device.
  CHECK(why.find("device") == std::string::npos);
  CHECK(why.find("driver") == std::string::npos);
}

}  // namespace
}  // namespace moebench
