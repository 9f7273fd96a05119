// Host-side helpers of the CUDA op files (ops_cuda.cpp, varlen_ops.cpp): the dtype codes of the
// parameter structs, the device check, the widest width the kernels take and the binding of a
// tensor's pointer and (batch, dim, seqlen) strides into a parameter struct. Torch through
// torch_api.h only, so both op-layer builds share them.
#pragma once

#include <cstdint>

#include "cuda/common.cuh"
#include "cuda/torch_api_cuda.h"

namespace causal_conv1d {
namespace cuda_ops {

namespace k = causal_conv1d_cuda;

constexpr int64_t kCudaMaxWidth = 8;

inline int dtype_code(ScalarType t) {
  switch (t) {
    case ScalarType::Float: return k::kFloat32;
    case ScalarType::Half: return k::kFloat16;
    case ScalarType::BFloat16: return k::kBFloat16;
    default: CC1D_CHECK_TYPE(false, "causal_conv1d CUDA kernels take float32, float16 or bfloat16, got ", t);
  }
  return -1;  // not reached
}

inline void check_cuda(const Tensor& x) {
  CC1D_CHECK(x.is_cuda(), "x must be a CUDA tensor for the CUDA kernels, got ", device_str(x));
}

// t's data pointer and its (batch, dim, seqlen) strides, in elements, into a parameter struct's fields.
template <typename Ptr>
void bind_bdl(const Tensor& t, Ptr& ptr, int64_t& bs, int64_t& cs, int64_t& ls) {
  ptr = t.data_ptr();
  bs = t.stride(0);
  cs = t.stride(1);
  ls = t.stride(2);
}

}  // namespace cuda_ops
}  // namespace causal_conv1d
