// cudnn_attention.hpp where the build found no cuDNN or no cudnn-frontend headers, or was told
// -DMOEBENCH_CUDNN=OFF (third_party/cudnn.cmake): create() says why, and nothing else runs.
#include "harness/backends/cudnn/cudnn_attention.hpp"

#include "harness/core/error.hpp"

namespace moebench {

namespace {

const char* const kAbsent =
    "this binary was built without cuDNN attention (no cudnn-frontend headers or no cuDNN "
    "found, or -DMOEBENCH_CUDNN=OFF; third_party/fetch-cudnn-frontend.sh installs the headers "
    "and the build then finds them)";

}  // namespace

struct CudnnAttention::Impl {};

std::unique_ptr<CudnnAttention> CudnnAttention::create(void*, std::string& why) {
  why = kAbsent;
  return nullptr;
}
std::string CudnnAttention::validate(const AttentionShape&, const Mat&, const Mat&, const Mat&,
                                     const Mat&, int) {
  return kAbsent;
}
CudnnAttention::CudnnAttention(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudnnAttention::~CudnnAttention() = default;
bool CudnnAttention::supports(const AttentionShape&, const Mat&, const Mat&, const Mat&, const Mat&,
                              const Mat&) {
  return false;
}
void CudnnAttention::forward(const AttentionShape&, const Mat&, const Mat&, const Mat&, const Mat&,
                             const Mat&) {
  throw RuntimeError(std::string("cuDNN attention: ") + kAbsent);
}
void CudnnAttention::backward(const AttentionShape&, const Mat&, const Mat&, const Mat&, const Mat&,
                              const Mat&, const Mat&, const Mat&, const Mat&, const Mat&) {
  throw RuntimeError(std::string("cuDNN attention: ") + kAbsent);
}
std::string CudnnAttention::versions() {
  return "";
}
int CudnnAttention::refused() const {
  return 0;
}
std::string CudnnAttention::last_refusal() const {
  return "";
}

}  // namespace moebench
