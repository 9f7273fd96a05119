// CUDA implementations of the causal_conv1d ops fwd, bwd and update, and the CUDA registration of
// every op (varlen_ops.cpp, packed_ops.cpp: the others; schemas: csrc/ops.cpp, docs/ARCHITECTURE.md).
// Validates with csrc/checks.h, allocates outputs in x's layout, fills the plain parameter
// structs of common.cuh and launches on the current stream through each op's dispatch table
// (dispatch.cu; the kernel files have no torch, so they compile fast and are the same in both
// op-layer builds).
// Torch is seen through csrc/torch_api.h and cuda/torch_api_cuda.h (stable ABI or ATen).
#include <algorithm>
#include <cstdint>
#include <optional>
#include <tuple>

#include "checks.h"
#include "cuda/common.cuh"
#include "cuda/op_helpers.h"
#include "cuda/torch_api_cuda.h"

namespace causal_conv1d {
namespace cuda {
namespace {

namespace k = causal_conv1d_cuda;
using namespace cuda_ops;  // kCudaMaxWidth, check_cuda, bind_bdl, fill_weight_bias

// 16-byte vector accesses along the unit-stride axis are legal for every row of t.
bool vec_rows_ok(const Tensor& t, bool channel_last) {
  const int64_t v = 16 / static_cast<int64_t>(t.element_size());
  if (!k::aligned_to(t.data_ptr(), 16)) return false;
  if (t.size(0) > 1 && t.stride(0) % v != 0) return false;
  const int64_t row_stride = channel_last ? t.stride(2) : t.stride(1);
  const int64_t rows = channel_last ? t.size(2) : t.size(1);
  return rows <= 1 || row_stride % v == 0;
}

void fill_common(k::ConvParams& p, const Tensor& x, const Tensor& weight,
                 const OptTensor& bias, const OptTensor& seq_idx,
                 const OptTensor& initial_states, bool silu) {
  p.batch = static_cast<int>(x.size(0));
  p.dim = static_cast<int>(x.size(1));
  p.seqlen = x.size(2);
  bind_bdl(x, p.x, p.x_bs, p.x_cs, p.x_ls);
  fill_weight_bias(p, x, weight, bias, silu);
  if (seq_idx.has_value()) {
    p.seq_idx = seq_idx->mutable_data_ptr<int32_t>();
    p.s_bs = seq_idx->stride(0);
    p.s_ls = seq_idx->stride(1);
  }
  if (initial_states.has_value()) {
    bind_bdl(*initial_states, p.init, p.i_bs, p.i_cs, p.i_ls);
  }
  p.channel_last = is_channel_last(x);
  p.num_sms = sm_count(device_index(x));
  p.pdl = pdl_capable(device_index(x));
}

void check_sizes(const Tensor& x) {
  CC1D_CHECK_VALUE(x.size(0) <= INT32_MAX && x.size(1) <= INT32_MAX,
                   "x must have batch and dim below 2^31 for the CUDA kernels, got shape ", fmt_sizes(x.sizes()));
}

std::tuple<Tensor, Tensor> fwd_cuda(const Tensor& x, const Tensor& weight,
                                            const OptTensor& bias,
                                            const OptTensor& seq_idx,
                                            const OptTensor& initial_states, bool return_final_states,
                                            bool silu, const OptTensor& residual) {
  check_fwd_args(x, weight, bias, seq_idx, initial_states, return_final_states, kCudaMaxWidth);
  check_residual(x, residual);
  check_cuda(x);
  check_sizes(x);
  const CudaDeviceGuard guard(x);
  const bool cl = is_channel_last(x);
  const int64_t B = x.size(0), D = x.size(1), L = x.size(2), W = weight.size(1);
  const ScalarType xt = x.scalar_type();
  Tensor out = empty_bdl(B, D, L, cl, xt, x);
  Tensor final_states = return_final_states ? empty_bdl(B, D, W - 1, cl, xt, x) : alloc_empty({0}, xt, x);
  if (B == 0 || D == 0) return {out, final_states};
  if (L == 0) {
    if (return_final_states) {
      if (initial_states.has_value()) {
        copy_into(final_states, *initial_states);
      } else {
        zero_fill(final_states);
      }
    }
    return {out, final_states};
  }
  k::ConvParams p;
  fill_common(p, x, weight, bias, seq_idx, initial_states, silu);
  bind_bdl(out, p.out, p.out_bs, p.out_cs, p.out_ls);
  if (return_final_states) {
    bind_bdl(final_states, p.final_out, p.f_bs, p.f_cs, p.f_ls);
  }
  p.vec_ok = vec_rows_ok(x, cl) && vec_rows_ok(out, cl);
  Tensor res;  // the kernels read the residual along x's unit-stride axis, through its strides
  if (residual.has_value()) {
    res = in_layout(*residual, cl);
    bind_bdl(res, p.res, p.r_bs, p.r_cs, p.r_ls);
    p.vec_ok = p.vec_ok && vec_rows_ok(res, cl);
  }
  k::run_fwd(p, current_cuda_stream(device_index(x)));
  return {out, final_states};
}

std::tuple<Tensor, Tensor, Tensor, Tensor> bwd_cuda(
    const Tensor& x, const Tensor& weight, const OptTensor& bias, const Tensor& dout_in,
    const OptTensor& seq_idx, const OptTensor& initial_states,
    const OptTensor& dfinal_states, bool return_dinitial_states, bool silu) {
  check_bwd_args(x, weight, bias, dout_in, seq_idx, initial_states, dfinal_states, return_dinitial_states,
                 kCudaMaxWidth);
  check_cuda(x);
  check_sizes(x);
  const CudaDeviceGuard guard(x);
  const bool cl = is_channel_last(x);
  const int64_t B = x.size(0), D = x.size(1), L = x.size(2), W = weight.size(1);
  const ScalarType xt = x.scalar_type(), wt = weight.scalar_type();
  Tensor dx = empty_bdl(B, D, L, cl, xt, x);
  Tensor dweight = alloc_empty({D, W}, wt, x);
  Tensor dbias = bias.has_value() ? alloc_empty({D}, bias->scalar_type(), x) : alloc_empty({0}, wt, x);
  Tensor dinit = return_dinitial_states ? empty_bdl(B, D, W - 1, cl, xt, x) : alloc_empty({0}, xt, x);
  if (B == 0 || D == 0 || L == 0) {
    zero_fill(dweight);
    if (bias.has_value()) zero_fill(dbias);
    if (return_dinitial_states) {
      if (dfinal_states.has_value() && L == 0) {
        copy_into(dinit, *dfinal_states);
      } else {
        zero_fill(dinit);
      }
    }
    return {dx, dweight, dbias, dinit};
  }
  const Tensor dout = in_layout(dout_in, cl);
  k::ConvParams p;
  fill_common(p, x, weight, bias, seq_idx, initial_states, silu);
  bind_bdl(dout, p.dout, p.do_bs, p.do_cs, p.do_ls);
  bind_bdl(dx, p.dx, p.dx_bs, p.dx_cs, p.dx_ls);
  if (dfinal_states.has_value()) {
    bind_bdl(*dfinal_states, p.dfinal, p.df_bs, p.df_cs, p.df_ls);
  }
  if (return_dinitial_states) {
    bind_bdl(dinit, p.dinit, p.di_bs, p.di_cs, p.di_ls);
  }
  p.dweight = dweight.data_ptr();
  p.dbias = bias.has_value() ? dbias.data_ptr() : nullptr;
  p.vec_ok = vec_rows_ok(x, cl) && vec_rows_ok(dout, cl) && vec_rows_ok(dx, cl);
  // The backward is deterministic whether or not deterministic_requested(): per-block partial sums
  // reduced in a fixed order, no atomics (see bwd.cu).
  // The path first (dispatch.cu): the workspace is the size the chosen kernels write.
  const causal_conv1d::KernelPath path = k::select_bwd(p);
  p.nparts = k::bwd_num_parts(path, p);
  const int64_t kwp = k::bwd_padded_width(p.width);
  Tensor partial = alloc_empty({p.nparts * (kwp + 1) * D}, ScalarType::Float, x);
  p.partial = partial.mutable_data_ptr<float>();
  k::run_bwd(path, p, current_cuda_stream(device_index(x)));
  return {dx, dweight, dbias, dinit};
}

// x (batch, dim, seqlen), or (batch, dim) for one token (then out is (batch, dim)): decoders call
// with 2-D x, and reading it here (no unsqueeze / squeeze: two dispatcher calls on the stable ABI)
// keeps the per-token host cost at one op call.
Tensor update_cuda(const Tensor& x, Tensor& conv_state, const Tensor& weight, const OptTensor& bias, bool silu,
                   const OptTensor& cache_seqlens, const OptTensor& conv_state_indices) {
  check_update_args(x, conv_state, weight, bias, cache_seqlens, conv_state_indices, kCudaMaxWidth,
                    /*allow_float64=*/false, /*allow_token=*/true);
  check_cuda(x);
  check_sizes(x);
  const int64_t B = x.size(0), D = x.size(1), L = x.dim() == 3 ? x.size(2) : 1;
  CC1D_CHECK_VALUE(L <= INT32_MAX && conv_state.size(0) <= INT32_MAX && conv_state.size(2) <= INT32_MAX,
                   "update: seqlen, cache size and state_len must be below 2^31");
  const CudaDeviceGuard guard(x);
  Tensor out = empty_update_out(x, L);
  if (B == 0 || D == 0 || L == 0) return out;
  k::UpdateParams p;
  p.batch = static_cast<int>(B);
  p.dim = static_cast<int>(D);
  p.seqlen = static_cast<int>(L);
  p.state_len = static_cast<int>(conv_state.size(2));
  p.state_batch = static_cast<int>(conv_state.size(0));
  p.num_sms = static_cast<int16_t>(std::min(sm_count(device_index(x)), 32767));
  bind_bdl(x, p.x, p.x_bs, p.x_cs, p.x_ls);
  fill_weight_bias(p, x, weight, bias, silu);
  bind_bdl(conv_state, p.state, p.st_bs, p.st_cs, p.st_ls);
  bind_bdl(out, p.out, p.out_bs, p.out_cs, p.out_ls);
  Tensor cs, idx;
  if (cache_seqlens.has_value()) {
    cs = as_contiguous(*cache_seqlens);
    p.cache_seqlens = cs.mutable_data_ptr<int32_t>();
  }
  if (conv_state_indices.has_value()) {
    idx = as_contiguous(*conv_state_indices);
    p.state_indices = idx.mutable_data_ptr<int32_t>();
  }
  k::run_update(p, current_cuda_stream(device_index(x)));
  return out;
}

}  // namespace
}  // namespace cuda
}  // namespace causal_conv1d

CC1D_LIBRARY_IMPL(causal_conv1d, CUDA, m) {
  m.impl("fwd", CC1D_KERNEL(&causal_conv1d::cuda::fwd_cuda));
  m.impl("bwd", CC1D_KERNEL(&causal_conv1d::cuda::bwd_cuda));
  m.impl("update", CC1D_KERNEL(&causal_conv1d::cuda::update_cuda));
  m.impl("varlen_fwd", CC1D_KERNEL(&causal_conv1d::cuda_varlen::varlen_fwd_cuda));
  m.impl("spec_update", CC1D_KERNEL(&causal_conv1d::cuda_varlen::spec_update_cuda));
  m.impl("packed_fwd", CC1D_KERNEL(&causal_conv1d::cuda_packed::packed_fwd_cuda));
  m.impl("packed_bwd", CC1D_KERNEL(&causal_conv1d::cuda_packed::packed_bwd_cuda));
}
