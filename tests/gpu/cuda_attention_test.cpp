// Core attention on the cuda backend against the cpu backend (tolerances: cuda_compute_test.cpp),
// whole and in chunks of heads, on MLA's operands in place.
#include "tests/gpu/gpu_fixture.hpp"

namespace moebench {
namespace {

using namespace gpu_test;

void run_attention(const AttentionShape& s) {
  const std::int64_t rows = s.batch * s.seq_len;
  const std::int64_t qk = s.heads * s.qk_dim, vd = s.heads * s.v_dim;
  Twin q = twin_random(rows, qk, 110);
  Twin k = twin_random(rows, qk, 111);
  Twin v = twin_random(rows, vd, 112);
  Twin o = twin_random(rows, vd, 113);
  Twin stats = twin_random(rows, s.heads, 114, 1.0f, true);
  cpu().attention_forward(s, q.cv(), k.cv(), v.cv(), o.cv(), stats.cv());
  dev().attention_forward(s, q.dv(), k.dv(), v.dv(), o.dv(), stats.dv());
  check_twin(o, kOne, "attention out");
  // The scores are BF16 products summed in FP32: the log-sum-exp agrees to FP32 order effects.
  check_twin(stats, 1e-4, "attention log-sum-exp");
  // Backward from the same (device) output on both sides, so only backward differs.
  const Vec o_dev = read(dev(), o.dv());
  cpu().upload(o_dev.data(), o.c);
  Twin dout = twin_random(rows, vd, 115);
  Twin dq = twin_random(rows, qk, 116), dk = twin_random(rows, qk, 117);
  Twin dv = twin_random(rows, vd, 118);
  cpu().attention_backward(s, q.cv(), k.cv(), v.cv(), o.cv(), dout.cv(), stats.cv(), dq.cv(),
                           dk.cv(), dv.cv());
  dev().attention_backward(s, q.dv(), k.dv(), v.dv(), o.dv(), dout.dv(), stats.dv(), dq.dv(),
                           dk.dv(), dv.dv());
  check_twin(dv, kOne, "attention dv");
  check_twin(dq, kChained, "attention dq");
  check_twin(dk, kChained, "attention dk");
}

// Both implementations on the device: the batched GEMMs, and cuDNN's fused flash attention
// (--attention-impl cudnn) where the binary has it; the same tolerances, since both keep the
// softmax in FP32 and round P and the outputs to BF16 once. A device without cuDNN attention
// says so and skips it.
TEST_CASE("attention with MLA's head dims (192 for q/k, 128 for v), causal and not") {
  for (AttentionImpl impl : {AttentionImpl::gemm, AttentionImpl::cudnn}) {
    CAPTURE(to_string(impl));
    if (!device_takes([&] { dev().set_attention_impl(impl); })) continue;
    AttentionShape s;
    s.batch = 2;
    s.seq_len = 48;
    s.heads = 3;
    s.qk_dim = 192;
    s.v_dim = 128;
    s.scale = 1.0f / std::sqrt(192.0f);
    run_attention(s);
    s.causal = false;
    s.seq_len = 33;
    run_attention(s);
    if (cuda_api() != nullptr && impl == AttentionImpl::cudnn) {
      CHECK(cuda_api()->attention_path().find("cuDNN fused flash attention") == 0);
    }
    dev().set_attention_impl(AttentionImpl::automatic);
  }
}

TEST_CASE("attention split into chunks of heads gives the same result") {
  CudaComputeApi* api = cuda_api();
  if (api == nullptr) return;
  api->set_attention_impl(AttentionImpl::gemm);  // the chunks are the batched GEMMs'
  api->set_attention_score_budget(1);            // one head per chunk
  AttentionShape s;
  s.batch = 1;
  s.seq_len = 64;
  s.heads = 4;
  s.qk_dim = 192;
  s.v_dim = 128;
  s.scale = 1.0f / std::sqrt(192.0f);
  run_attention(s);
  api->set_attention_score_budget(std::size_t{1} << 30);
  api->set_attention_impl(AttentionImpl::automatic);
}

// MLA's operands in place (q, kv = per head [k_nope | v], the rope key shared by the heads)
// against the cpu backend on the same operands (itself checked against plain attention over
// built k and v, tests/unit/attention_operands_test.cpp). The rope key's gradient sums 16 heads'
// BF16 products in FP32 on both paths, so kChained holds for it as for dk.
void run_mla_attention(const AttentionShape& s, const MlaDims& d) {
  const std::int64_t rows = s.batch * s.seq_len;
  Twin q = twin_random(rows, d.heads * d.dq(), 210), kv = twin_random(rows, d.kv_width(), 211);
  Twin kr = twin_random(rows, d.dr, 212), o = twin_random(rows, d.heads * d.dv, 213);
  Twin stats = twin_random(rows, s.heads, 214, 1.0f, true);
  cpu().attention_forward(s, AttentionOperands::mla(d, q.cv(), kv.cv(), kr.cv()), o.cv(),
                          stats.cv());
  dev().attention_forward(s, AttentionOperands::mla(d, q.dv(), kv.dv(), kr.dv()), o.dv(),
                          stats.dv());
  check_twin(o, kOne, "mla attention out");
  check_twin(stats, 1e-4, "mla attention log-sum-exp");
  const Vec o_dev = read(dev(), o.dv());
  cpu().upload(o_dev.data(), o.c);
  Twin dout = twin_random(rows, d.heads * d.dv, 215), dq = twin_random(rows, d.heads * d.dq(), 216);
  Twin dkv = twin_random(rows, d.kv_width(), 217), dkr = twin_random(rows, d.dr, 218);
  cpu().attention_backward(s, AttentionOperands::mla(d, q.cv(), kv.cv(), kr.cv()), o.cv(),
                           dout.cv(), stats.cv(),
                           AttentionOperands::mla(d, dq.cv(), dkv.cv(), dkr.cv()));
  dev().attention_backward(s, AttentionOperands::mla(d, q.dv(), kv.dv(), kr.dv()), o.dv(),
                           dout.dv(), stats.dv(),
                           AttentionOperands::mla(d, dq.dv(), dkv.dv(), dkr.dv()));
  check_twin(dq, kChained, "mla attention dq");
  check_twin(dkv, kChained, "mla attention dkv (dk_nope and dv)");
  check_twin(dkr, kChained, "mla attention dkrope (summed over heads)");
}

// Both implementations: the batched GEMMs read kv and krope in place (krope at batch stride 0);
// cuDNN gets k and v gathered into packed scratch, its gradients scattered back. With a score
// budget of one byte, one head per chunk: the rope key's gradient then sums over chunks.
TEST_CASE("attention on MLA's operands in place, whole and one head per chunk") {
  for (AttentionImpl impl : {AttentionImpl::gemm, AttentionImpl::cudnn}) {
    CAPTURE(to_string(impl));
    if (!device_takes([&] { dev().set_attention_impl(impl); })) continue;
    const MlaDims d{16, 128, 64, 128};
    AttentionShape s{2,   40, d.heads, d.dq(), d.dv, 1.0f / std::sqrt(192.0f),
                     true};  // 2 x 40 tokens
    run_mla_attention(s, d);
    if (CudaComputeApi* api = cuda_api()) {
      api->set_attention_score_budget(1);
      s.causal = false;
      run_mla_attention(s, d);
      api->set_attention_score_budget(std::size_t{1} << 30);
    }
    dev().set_attention_impl(AttentionImpl::automatic);
  }
}

// The smallest gap between two choice scores (score + bias) of a token: a near-tie lets the
// device's last-bit differences pick another expert.

}  // namespace
}  // namespace moebench
