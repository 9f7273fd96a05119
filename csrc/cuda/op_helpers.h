// Host-side helpers of the CUDA op files (ops_cuda.cpp, varlen_ops.cpp, packed_ops.cpp): the dtype
// codes of the parameter structs, the device check, the widest width the kernels take, the binding
// of a tensor's pointer and strides, of weight and bias and of a state cache into a parameter
// struct (in_layout, dout / residual in x's layout, is checks.h's). Torch through
// torch_api.h only, so both op-layer builds share them.
#pragma once

#include <cstdint>
#include <tuple>

#include "checks.h"
#include "cuda/common.cuh"
#include "op_signatures.h"
#include "cuda/torch_api_cuda.h"
#include "cuda/varlen.cuh"

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

// t's data pointer and the strides of its last two axes, in order (a 2-D tensor, or the (dim, total)
// view of a (1, dim, total) one), into a parameter struct's fields.
template <typename Ptr>
void bind_2d(const Tensor& t, Ptr& ptr, int64_t& s0, int64_t& s1) {
  ptr = t.data_ptr();
  s0 = t.stride(t.dim() - 2);
  s1 = t.stride(t.dim() - 1);
}

// What every parameter struct holds alike: x's dtype code, the activation, and weight (dim, width)
// and bias (dim,) or none: the width, pointers, strides and dtype codes.
template <typename P>
void fill_weight_bias(P& p, const Tensor& x, const Tensor& weight, const OptTensor& bias, bool silu) {
  p.x_dtype = dtype_code(x.scalar_type());
  p.silu = silu;
  p.width = static_cast<int>(weight.size(1));
  p.w_dtype = dtype_code(weight.scalar_type());
  p.weight = weight.data_ptr();
  p.w_cs = weight.stride(0);
  p.w_ws = weight.stride(1);
  if (bias.has_value()) {
    p.bias = bias->data_ptr();
    p.b_dtype = dtype_code(bias->scalar_type());
    p.b_s = bias->stride(0);
  }
}

// A state cache (lines, dim, state_len) into a serving parameter struct: its dtype code, pointer
// (into `ptr`), strides and sizes.
template <typename P, typename Ptr>
void bind_cache(P& p, Ptr& ptr, const Tensor& cache) {
  p.st_dtype = dtype_code(cache.scalar_type());
  bind_bdl(cache, ptr, p.st_bs, p.st_cs, p.st_ls);
  p.lines = cache.size(0);
  p.state_len = cache.size(2);
}

// The output of update / spec_update: (batch, dim) contiguous for a 2-D x (one token), else in x's layout.
inline Tensor empty_update_out(const Tensor& x, int64_t seqlen) {
  if (x.dim() == 2) return alloc_empty({x.size(0), x.size(1)}, x.scalar_type(), x);
  return empty_bdl(x.size(0), x.size(1), seqlen, is_channel_last(x), x.scalar_type(), x);
}

// varlen_fwd's launch, the packed forward's too: the rest of p (qsl, has_init and ci set by the
// caller) from x and out (dim, total_tokens) as their last two axes, batch requests, the state cache
// (lines, dim, state_len) and pad_slot_id; then the kernels on x's device's current stream.
inline void launch_varlen_fwd(k::VarlenParams& p, const Tensor& x, const Tensor& out, const Tensor& weight,
                              const OptTensor& bias, bool silu, const Tensor& states, int64_t batch,
                              int64_t pad_slot_id) {
  p.dim = static_cast<int>(x.size(x.dim() - 2));
  p.batch = static_cast<int>(batch);
  p.total = x.size(x.dim() - 1);
  fill_weight_bias(p, x, weight, bias, silu);
  bind_2d(x, p.x, p.x_ds, p.x_ts);
  bind_2d(out, p.out, p.o_ds, p.o_ts);
  bind_cache(p, p.states, states);
  p.pad_slot_id = pad_slot_id;
  p.num_sms = sm_count(device_index(x));
  k::run_varlen_fwd(p, current_cuda_stream(device_index(x)));
}

}  // namespace cuda_ops

// The ops of varlen_ops.cpp and packed_ops.cpp (registered with fwd, bwd and update in ops_cuda.cpp;
// signatures: op_signatures.h).
namespace cuda_varlen {
VarlenFwdOp varlen_fwd_cuda;
SpecUpdateOp spec_update_cuda;
}  // namespace cuda_varlen
namespace cuda_packed {
PackedFwdOp packed_fwd_cuda;
PackedBwdOp packed_bwd_cuda;
}  // namespace cuda_packed
}  // namespace causal_conv1d
