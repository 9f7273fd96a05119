// CUDA implementations of the serving ops varlen_fwd and spec_update (schemas: csrc/ops.cpp;
// checks: csrc/varlen_checks.h; kernels: cuda/varlen.cu; semantics: causal_conv1d/varlen.py).
// Shape/dtype checks only on the host; nothing here reads device memory, so both ops are one kernel
// launch with no synchronisation (CUDA-graph capturable).
#include <cstdint>
#include <optional>

#include "varlen_checks.h"
#include "cuda/common.cuh"
#include "cuda/op_helpers.h"
#include "cuda/torch_api_cuda.h"
#include "cuda/varlen.cuh"

namespace causal_conv1d {
namespace cuda_varlen {
namespace {

namespace k = causal_conv1d_cuda;
using namespace cuda_ops;  // kCudaMaxWidth, dtype_code, check_cuda, bind_bdl

template <typename P>
void fill_weight_bias(P& p, const Tensor& weight, const OptTensor& bias) {
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

Tensor varlen_fwd_cuda(const Tensor& x, const Tensor& weight, const OptTensor& bias, Tensor& conv_states,
                       const Tensor& query_start_loc, const OptTensor& cache_indices,
                       const OptTensor& has_initial_state, bool silu, int64_t pad_slot_id) {
  check_varlen_fwd_args(x, weight, bias, conv_states, query_start_loc, cache_indices, has_initial_state,
                        kCudaMaxWidth);
  check_cuda(x);
  const int64_t D = x.size(0), T = x.size(1);
  const int64_t batch = query_start_loc.size(0) - 1;
  CC1D_CHECK_VALUE(D <= INT32_MAX && batch <= INT32_MAX, "x must have dim below 2^31 and batch below 2^31");
  const CudaDeviceGuard guard(x);
  const bool cl = varlen_is_channel_last(x);
  Tensor out = empty_dt(D, T, cl, x.scalar_type(), x);
  if (D == 0 || T == 0) return out;
  const Tensor q = as_contiguous(query_start_loc);
  const Tensor idx = cache_indices.has_value() ? as_contiguous(*cache_indices) : Tensor();
  const Tensor hi =
      has_initial_state.has_value() ? as_contiguous(to_dtype(*has_initial_state, ScalarType::Int)) : Tensor();
  k::VarlenParams p;
  p.dim = static_cast<int>(D);
  p.batch = static_cast<int>(batch);
  p.total = T;
  p.x_dtype = dtype_code(x.scalar_type());
  p.silu = silu;
  p.x = x.data_ptr();
  p.x_ds = x.stride(0);
  p.x_ts = x.stride(1);
  p.out = out.data_ptr();
  p.o_ds = out.stride(0);
  p.o_ts = out.stride(1);
  fill_weight_bias(p, weight, bias);
  bind_bdl(conv_states, p.states, p.st_bs, p.st_cs, p.st_ls);
  p.lines = conv_states.size(0);
  p.state_len = conv_states.size(2);
  p.qsl = q.const_data_ptr<int32_t>();
  p.cache_indices = idx.defined() ? idx.const_data_ptr<int32_t>() : nullptr;
  p.has_init = hi.defined() ? hi.const_data_ptr<int32_t>() : nullptr;
  p.pad_slot_id = pad_slot_id;
  k::run_varlen_fwd(p, current_cuda_stream(device_index(x)));
  return out;
}

// x (batch, dim, seqlen), or (batch, dim) for one token (then out is (batch, dim)), read here as is.
Tensor spec_update_cuda(const Tensor& x, Tensor& conv_state, const Tensor& weight, const OptTensor& bias, bool silu,
                        const OptTensor& conv_state_indices, const OptTensor& num_accepted_tokens,
                        int64_t pad_slot_id) {
  check_spec_update_args(x, conv_state, weight, bias, conv_state_indices, num_accepted_tokens, kCudaMaxWidth,
                         /*allow_float64=*/false, /*allow_token=*/true);
  check_cuda(x);
  const int64_t B = x.size(0), D = x.size(1), L = x.dim() == 3 ? x.size(2) : 1;
  CC1D_CHECK_VALUE(B <= 65535 && D <= INT32_MAX && L <= INT32_MAX,
                   "spec_update: batch must be at most 65535 and dim, seqlen below 2^31, got x of shape ",
                   fmt_sizes(x.sizes()));
  const CudaDeviceGuard guard(x);
  Tensor out = empty_update_out(x, L);
  if (B == 0 || D == 0 || L == 0) return out;
  const Tensor idx = conv_state_indices.has_value() ? as_contiguous(*conv_state_indices) : Tensor();
  const Tensor na = num_accepted_tokens.has_value() ? as_contiguous(*num_accepted_tokens) : Tensor();
  k::SpecParams p;
  p.batch = static_cast<int>(B);
  p.dim = static_cast<int>(D);
  p.seqlen = static_cast<int>(L);
  p.x_dtype = dtype_code(x.scalar_type());
  p.silu = silu;
  bind_bdl(x, p.x, p.x_bs, p.x_cs, p.x_ls);
  bind_bdl(out, p.out, p.o_bs, p.o_cs, p.o_ls);
  fill_weight_bias(p, weight, bias);
  bind_bdl(conv_state, p.state, p.st_bs, p.st_cs, p.st_ls);
  p.lines = conv_state.size(0);
  p.state_len = conv_state.size(2);
  p.state_indices = idx.defined() ? idx.const_data_ptr<int32_t>() : nullptr;
  p.num_accepted = na.defined() ? na.const_data_ptr<int32_t>() : nullptr;
  p.pad_slot_id = pad_slot_id;
  k::run_spec_update(p, current_cuda_stream(device_index(x)));
  return out;
}

}  // namespace
}  // namespace cuda_varlen
}  // namespace causal_conv1d

CC1D_LIBRARY_IMPL(causal_conv1d, CUDA, m) {
  m.impl("varlen_fwd", CC1D_KERNEL(&causal_conv1d::cuda_varlen::varlen_fwd_cuda));
  m.impl("spec_update", CC1D_KERNEL(&causal_conv1d::cuda_varlen::spec_update_cuda));
}
