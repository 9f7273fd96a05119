// Host-side helpers of the CUDA op files (ops_cuda.cpp, varlen_ops.cpp): the dtype codes of the
// parameter structs, the device check, the widest width the kernels take and the binding of a
// tensor's pointer and (batch, dim, seqlen) strides into a parameter struct. Torch through
// torch_api.h only, so both op-layer builds share them.
#pragma once

#include <cstdint>

#include "checks.h"
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

// t's data pointer and its (batch, dim, seqlen) strides, in elements, into a parameter struct's fields;
// a 2-D t (batch, dim) is one token (seqlen stride 1: never stepped over).
template <typename Ptr>
void bind_bdl(const Tensor& t, Ptr& ptr, int64_t& bs, int64_t& cs, int64_t& ls) {
  ptr = t.data_ptr();
  bs = t.stride(0);
  cs = t.stride(1);
  ls = t.dim() == 3 ? t.stride(2) : 1;
}

// The output of update / spec_update: (batch, dim) contiguous for a 2-D x (one token), else in x's layout.
inline Tensor empty_update_out(const Tensor& x, int64_t seqlen) {
  if (x.dim() == 2) return alloc_empty({x.size(0), x.size(1)}, x.scalar_type(), x);
  return empty_bdl(x.size(0), x.size(1), seqlen, is_channel_last(x), x.scalar_type(), x);
}

}  // namespace cuda_ops
}  // namespace causal_conv1d
