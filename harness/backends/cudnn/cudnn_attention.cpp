// cuDNN's flash attention (cudnn_attention.hpp), built where cuDNN and cudnn-frontend's headers
// were found (third_party/cudnn.cmake; cudnn_absent.cpp otherwise).
#include "harness/backends/cudnn/cudnn_attention.hpp"

#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstdint>
#include <map>
#include <tuple>
#include <unordered_map>
#include <vector>

#include <cudnn_frontend.h>

#include "harness/core/error.hpp"

namespace moebench {

namespace fe = cudnn_frontend;

namespace {

// The tensors' uids in a graph's variant pack.
enum Uid : std::int64_t { kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV };

// The graph's shape and views: every leading dimension matters to the plan (the statistics are
// always packed).
struct Key {
  std::int64_t batch, seq, heads, dqk, dv;
  float scale;
  bool causal;
  std::int64_t ld_q, ld_k, ld_v, ld_o;
  bool operator<(const Key& o) const {
    return std::tie(batch, seq, heads, dqk, dv, scale, causal, ld_q, ld_k, ld_v, ld_o) <
           std::tie(o.batch, o.seq, o.heads, o.dqk, o.dv, o.scale, o.causal, o.ld_q, o.ld_k, o.ld_v,
                    o.ld_o);
  }
};

Key key_of(const AttentionShape& s, const Mat& q, const Mat& k, const Mat& v, const Mat& out) {
  return Key{s.batch,  s.seq_len, s.heads, s.qk_dim, s.v_dim, s.scale,
             s.causal, q.ld,      k.ld,    v.ld,     out.ld};
}

void check_stats(const AttentionShape& s, const Mat& stats) {
  const Mat want = CudnnAttention::stats_view(stats.data, s);
  MB_CHECK(stats.rows == want.rows && stats.cols == want.cols && stats.ld == want.ld &&
               stats.dtype == DType::f32,
           "cuDNN attention: the statistics are " << stats.rows << " x " << stats.cols << " (ld "
                                                  << stats.ld << ", " << dtype_name(stats.dtype)
                                                  << "), not the packed [batch, heads, seq, 1] "
                                                  << want.rows << " x " << want.cols << " fp32");
}

// [batch, heads, seq, d] over a row-major rows x (heads d) view with leading dimension ld.
std::vector<std::int64_t> dims(const Key& k, std::int64_t d) {
  return {k.batch, k.heads, k.seq, d};
}
std::vector<std::int64_t> strides(const Key& k, std::int64_t d, std::int64_t ld) {
  return {k.seq * ld, d, ld, 1};
}
// The statistics, packed BHSD (cudnn_attention.hpp says why).
std::vector<std::int64_t> stats_dims(const Key& k) {
  return {k.batch, k.heads, k.seq, 1};
}
std::vector<std::int64_t> stats_strides(const Key& k) {
  return {k.heads * k.seq, k.seq, 1, 1};
}

std::shared_ptr<fe::graph::Tensor_attributes> input(fe::graph::Graph& g, const char* name, Uid uid,
                                                    std::vector<std::int64_t> dim,
                                                    std::vector<std::int64_t> stride) {
  return g.tensor(
      fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_dim(dim).set_stride(stride));
}

// sm: the device's compute capability (90: Hopper), or 0 to ask the device. Set before any node
// is added: a node copies the graph's context when it is made.
std::shared_ptr<fe::graph::Graph> new_graph(int sm) {
  auto g = std::make_shared<fe::graph::Graph>();
  if (sm > 0) g->set_sm_version(sm);
  g->set_io_data_type(fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  return g;
}

// q, k and v, the inputs of both graphs.
struct Qkv {
  std::shared_ptr<fe::graph::Tensor_attributes> q, k, v;
};
Qkv qkv(fe::graph::Graph& g, const Key& k) {
  return {input(g, "q", kQ, dims(k, k.dqk), strides(k, k.dqk, k.ld_q)),
          input(g, "k", kK, dims(k, k.dqk), strides(k, k.dqk, k.ld_k)),
          input(g, "v", kV, dims(k, k.dv), strides(k, k.dv, k.ld_v))};
}

std::shared_ptr<fe::graph::Graph> forward_graph(const Key& k, int sm) {
  auto g = new_graph(sm);
  const Qkv in = qkv(*g, k);
  auto options = fe::graph::SDPA_attributes()
                     .set_name("flash_attention")
                     .set_generate_stats(true)
                     .set_attn_scale(k.scale)
                     .set_causal_mask(k.causal);
  auto [o, stats] = g->sdpa(in.q, in.k, in.v, options);
  o->set_output(true).set_uid(kO).set_dim(dims(k, k.dv)).set_stride(strides(k, k.dv, k.ld_o));
  stats->set_output(true)
      .set_uid(kStats)
      .set_data_type(fe::DataType_t::FLOAT)
      .set_dim(stats_dims(k))
      .set_stride(stats_strides(k));
  return g;
}

// The gradients share their inputs' leading dimensions (the step's buffers are dense).
std::shared_ptr<fe::graph::Graph> backward_graph(const Key& k, int sm) {
  auto g = new_graph(sm);
  const Qkv in = qkv(*g, k);
  auto o = input(*g, "o", kO, dims(k, k.dv), strides(k, k.dv, k.ld_o));
  auto d_o = input(*g, "do", kDO, dims(k, k.dv), strides(k, k.dv, k.ld_o));
  auto stats = g->tensor(fe::graph::Tensor_attributes()
                             .set_name("stats")
                             .set_uid(kStats)
                             .set_dim(stats_dims(k))
                             .set_stride(stats_strides(k))
                             .set_data_type(fe::DataType_t::FLOAT));
  auto options = fe::graph::SDPA_backward_attributes()
                     .set_name("flash_attention_backward")
                     .set_attn_scale(k.scale)
                     .set_causal_mask(k.causal);
  auto [dq, dk, dv] = g->sdpa_backward(in.q, in.k, in.v, o, d_o, stats, options);
  dq->set_output(true).set_uid(kDQ).set_dim(dims(k, k.dqk)).set_stride(strides(k, k.dqk, k.ld_q));
  dk->set_output(true).set_uid(kDK).set_dim(dims(k, k.dqk)).set_stride(strides(k, k.dqk, k.ld_k));
  dv->set_output(true).set_uid(kDV).set_dim(dims(k, k.dv)).set_stride(strides(k, k.dv, k.ld_v));
  return g;
}

// validate, lower, plan, check and build: false (and the reason) where cuDNN refuses.
bool finish(fe::graph::Graph& g, cudnnHandle_t h, std::string& why) {
  for (auto step : {0, 1, 2, 3, 4}) {
    fe::error_t e;
    switch (step) {
      case 0:
        e = g.validate();
        break;
      case 1:
        e = g.build_operation_graph(h);
        break;
      case 2:
        e = g.create_execution_plans({fe::HeurMode_t::A});
        break;
      case 3:
        e = g.check_support(h);
        break;
      default:
        e = g.build_plans(h);
        break;
    }
    if (e.is_bad()) {
      why = e.get_message();
      return false;
    }
  }
  return true;
}

std::string cudnn_error(cudnnStatus_t s, const char* call) {
  return s == CUDNN_STATUS_SUCCESS ? std::string()
                                   : std::string(call) + " failed: " + cudnnGetErrorString(s);
}

}  // namespace

struct CudnnAttention::Impl {
  cudnnHandle_t handle = nullptr;
  cudaStream_t stream = nullptr;
  struct Plans {
    std::shared_ptr<fe::graph::Graph> forward, backward;  // both null: refused
    std::string why;
  };
  std::map<Key, Plans> plans;
  void* workspace = nullptr;
  std::int64_t workspace_bytes = 0;
  int refused = 0;
  std::string last_refusal;

  ~Impl() {
    if (workspace != nullptr) (void)cudaFree(workspace);
    if (handle != nullptr) (void)cudnnDestroy(handle);
  }

  void* workspace_for(const fe::graph::Graph& g) {
    std::int64_t need = 0;
    if (g.get_workspace_size(need).is_bad()) {
      throw RuntimeError("cuda backend: cuDNN attention: no workspace size for its plan");
    }
    if (need > workspace_bytes) {
      // Stream-ordered, as every allocation inside the step (cuda_backend.hpp).
      if (workspace != nullptr && cudaFreeAsync(workspace, stream) != cudaSuccess) {
        throw RuntimeError("cuda backend: cuDNN attention: freeing its workspace failed");
      }
      workspace = nullptr;
      if (cudaMallocAsync(&workspace, static_cast<std::size_t>(need), stream) != cudaSuccess) {
        (void)cudaGetLastError();
        throw RuntimeError("cuda backend: cuDNN attention: cannot allocate a " +
                           std::to_string(need) + "-byte workspace");
      }
      workspace_bytes = need;
    }
    return workspace;
  }

  void run(const fe::graph::Graph& g, std::unordered_map<std::int64_t, void*>& pack,
           const char* what) {
    fe::error_t e = g.execute(handle, pack, workspace_for(g));
    if (e.is_bad()) {
      throw RuntimeError(std::string("cuda backend: cuDNN attention ") + what +
                         " failed: " + e.get_message());
    }
  }
};

std::unique_ptr<CudnnAttention> CudnnAttention::create(void* stream, std::string& why) {
  auto impl = std::make_unique<Impl>();
  impl->stream = static_cast<cudaStream_t>(stream);
  why = cudnn_error(cudnnCreate(&impl->handle), "cudnnCreate");
  if (why.empty()) {
    why = cudnn_error(cudnnSetStream(impl->handle, impl->stream), "cudnnSetStream");
  }
  if (!why.empty()) return nullptr;  // Impl's destructor frees a handle that was made
  return std::unique_ptr<CudnnAttention>(new CudnnAttention(std::move(impl)));
}

std::string CudnnAttention::validate(const AttentionShape& s, const Mat& q, const Mat& k,
                                     const Mat& v, const Mat& out, int sm) {
  const Key key = key_of(s, q, k, v, out);
  for (const auto& g : {forward_graph(key, sm), backward_graph(key, sm)}) {
    fe::error_t e = g->validate();
    if (e.is_bad()) return e.get_message();
  }
  return "";
}

CudnnAttention::CudnnAttention(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudnnAttention::~CudnnAttention() = default;

bool CudnnAttention::supports(const AttentionShape& s, const Mat& q, const Mat& k, const Mat& v,
                              const Mat& out, const Mat& stats) {
  check_stats(s, stats);
  const Key key = key_of(s, q, k, v, out);
  auto it = impl_->plans.find(key);
  if (it == impl_->plans.end()) {
    Impl::Plans p;
    p.forward = forward_graph(key, 0);
    if (!finish(*p.forward, impl_->handle, p.why)) p.forward = nullptr;
    if (p.forward) {
      p.backward = backward_graph(key, 0);
      if (!finish(*p.backward, impl_->handle, p.why)) p.backward = nullptr;
    }
    if (!p.backward) {
      p.forward = nullptr;
      ++impl_->refused;
      impl_->last_refusal = p.why;
    }
    it = impl_->plans.emplace(key, std::move(p)).first;
  }
  return it->second.forward != nullptr;
}

void CudnnAttention::forward(const AttentionShape& s, const Mat& q, const Mat& k, const Mat& v,
                             const Mat& out, const Mat& stats) {
  check_stats(s, stats);
  const auto it = impl_->plans.find(key_of(s, q, k, v, out));
  MB_CHECK(it != impl_->plans.end() && it->second.forward, "cuDNN attention forward: no plan");
  std::unordered_map<std::int64_t, void*> pack = {
      {kQ, q.data}, {kK, k.data}, {kV, v.data}, {kO, out.data}, {kStats, stats.data}};
  impl_->run(*it->second.forward, pack, "forward");
}

void CudnnAttention::backward(const AttentionShape& s, const Mat& q, const Mat& k, const Mat& v,
                              const Mat& out, const Mat& dout, const Mat& stats, const Mat& dq,
                              const Mat& dk, const Mat& dv) {
  MB_CHECK(dq.ld == q.ld && dk.ld == k.ld && dv.ld == v.ld && dout.ld == out.ld,
           "cuDNN attention backward: the gradients' leading dimensions differ from the inputs'");
  check_stats(s, stats);
  const auto it = impl_->plans.find(key_of(s, q, k, v, out));
  MB_CHECK(it != impl_->plans.end() && it->second.backward, "cuDNN attention backward: no plan");
  std::unordered_map<std::int64_t, void*> pack = {
      {kQ, q.data},         {kK, k.data},   {kV, v.data},   {kO, out.data}, {kDO, dout.data},
      {kStats, stats.data}, {kDQ, dq.data}, {kDK, dk.data}, {kDV, dv.data}};
  impl_->run(*it->second.backward, pack, "backward");
}

std::string CudnnAttention::versions() {
  const std::size_t v = cudnnGetVersion();  // major * 10000 + minor * 100 + patch (cuDNN 9)
  return "cuDNN " + std::to_string(v / 10000) + "." + std::to_string((v / 100) % 100) + "." +
         std::to_string(v % 100) + ", cudnn-frontend " +
         std::to_string(CUDNN_FRONTEND_MAJOR_VERSION) + "." +
         std::to_string(CUDNN_FRONTEND_MINOR_VERSION) + "." +
         std::to_string(CUDNN_FRONTEND_PATCH_VERSION);
}

int CudnnAttention::refused() const {
  return impl_->refused;
}
std::string CudnnAttention::last_refusal() const {
  return impl_->last_refusal;
}

}  // namespace moebench
