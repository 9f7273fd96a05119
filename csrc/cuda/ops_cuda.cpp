// CUDA implementations of the causal_conv1d ops (schemas: csrc/ops.cpp, docs/ARCHITECTURE.md).
// Validates with csrc/checks.h, allocates outputs in x's layout, fills the plain parameter
// structs of common.cuh and launches on the current stream. Kernels live in fwd.cu, bwd.cu and
// update.cu (no ATen there, so they compile fast).
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <cstdint>
#include <optional>
#include <tuple>

#include "checks.h"
#include "cuda/common.cuh"

namespace causal_conv1d {
namespace cuda {
namespace {

namespace k = causal_conv1d_cuda;

constexpr int64_t kCudaMaxWidth = 8;

int dtype_code(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return k::kFloat32;
    case at::kHalf: return k::kFloat16;
    case at::kBFloat16: return k::kBFloat16;
    default: TORCH_CHECK_TYPE(false, "causal_conv1d CUDA kernels take float32, float16 or bfloat16, got ", t);
  }
}

void check_cuda(const at::Tensor& x) {
  TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor for the CUDA kernels, got ", x.device());
}

// 16-byte vector accesses along the unit-stride axis are legal for every row of t.
bool vec_rows_ok(const at::Tensor& t, bool channel_last) {
  const int64_t v = 16 / static_cast<int64_t>(t.element_size());
  if (!k::aligned_to(t.data_ptr(), 16)) return false;
  if (t.size(0) > 1 && t.stride(0) % v != 0) return false;
  const int64_t row_stride = channel_last ? t.stride(2) : t.stride(1);
  const int64_t rows = channel_last ? t.size(2) : t.size(1);
  return rows <= 1 || row_stride % v == 0;
}

// dout must have its unit stride on x's unit-stride axis; copy it into x's layout otherwise.
at::Tensor in_layout(const at::Tensor& t, bool channel_last) {
  const bool ok = channel_last ? t.stride(1) == 1 : t.stride(2) == 1;
  if (ok) return t;
  at::Tensor r = empty_bdl(t.size(0), t.size(1), t.size(2), channel_last, t.options());
  r.copy_(t);
  return r;
}

// t's data pointer and its (batch, dim, seqlen) strides, in elements, into a parameter struct's fields.
template <typename Ptr>
void bind_bdl(const at::Tensor& t, Ptr& ptr, int64_t& bs, int64_t& cs, int64_t& ls) {
  ptr = t.data_ptr();
  bs = t.stride(0);
  cs = t.stride(1);
  ls = t.stride(2);
}

// The fields ConvParams and UpdateParams share: x, weight and bias (pointers, strides, dtypes), the
// width and the activation.
template <typename Params>
void fill_x_weight_bias(Params& p, const at::Tensor& x, const at::Tensor& weight,
                        const std::optional<at::Tensor>& bias, bool silu) {
  p.width = static_cast<int>(weight.size(1));
  p.x_dtype = dtype_code(x.scalar_type());
  p.w_dtype = dtype_code(weight.scalar_type());
  p.silu = silu;
  bind_bdl(x, p.x, p.x_bs, p.x_cs, p.x_ls);
  p.weight = weight.data_ptr();
  p.w_cs = weight.stride(0);
  p.w_ws = weight.stride(1);
  if (bias.has_value()) {
    p.bias = bias->data_ptr();
    p.b_dtype = dtype_code(bias->scalar_type());
    p.b_s = bias->stride(0);
  }
}

void fill_common(k::ConvParams& p, const at::Tensor& x, const at::Tensor& weight,
                 const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& seq_idx,
                 const std::optional<at::Tensor>& initial_states, bool silu) {
  p.batch = static_cast<int>(x.size(0));
  p.dim = static_cast<int>(x.size(1));
  p.seqlen = x.size(2);
  fill_x_weight_bias(p, x, weight, bias, silu);
  if (seq_idx.has_value()) {
    p.seq_idx = seq_idx->data_ptr<int32_t>();
    p.s_bs = seq_idx->stride(0);
    p.s_ls = seq_idx->stride(1);
  }
  if (initial_states.has_value()) {
    bind_bdl(*initial_states, p.init, p.i_bs, p.i_cs, p.i_ls);
  }
  p.num_sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
}

void check_sizes(const at::Tensor& x) {
  TORCH_CHECK_VALUE(x.size(0) <= INT32_MAX && x.size(1) <= INT32_MAX,
                    "x must have batch and dim below 2^31 for the CUDA kernels, got shape ", x.sizes());
}

std::tuple<at::Tensor, at::Tensor> fwd_cuda(const at::Tensor& x, const at::Tensor& weight,
                                            const std::optional<at::Tensor>& bias,
                                            const std::optional<at::Tensor>& seq_idx,
                                            const std::optional<at::Tensor>& initial_states, bool return_final_states,
                                            bool silu) {
  check_fwd_args(x, weight, bias, seq_idx, initial_states, return_final_states, kCudaMaxWidth);
  check_cuda(x);
  check_sizes(x);
  const c10::cuda::OptionalCUDAGuard guard(x.device());
  const bool cl = is_channel_last(x);
  const int64_t B = x.size(0), D = x.size(1), L = x.size(2), W = weight.size(1);
  at::Tensor out = empty_bdl(B, D, L, cl, x.options());
  at::Tensor final_states = return_final_states ? empty_bdl(B, D, W - 1, cl, x.options()) : at::empty({0}, x.options());
  if (B == 0 || D == 0) return {out, final_states};
  if (L == 0) {
    if (return_final_states) {
      if (initial_states.has_value()) {
        final_states.copy_(*initial_states);
      } else {
        final_states.zero_();
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
  k::run_fwd(p, cl, at::cuda::getCurrentCUDAStream());
  return {out, final_states};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> bwd_cuda(
    const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias, const at::Tensor& dout_in,
    const std::optional<at::Tensor>& seq_idx, const std::optional<at::Tensor>& initial_states,
    const std::optional<at::Tensor>& dfinal_states, bool return_dinitial_states, bool silu) {
  check_bwd_args(x, weight, bias, dout_in, seq_idx, initial_states, dfinal_states, return_dinitial_states,
                 kCudaMaxWidth);
  check_cuda(x);
  check_sizes(x);
  const c10::cuda::OptionalCUDAGuard guard(x.device());
  const bool cl = is_channel_last(x);
  const int64_t B = x.size(0), D = x.size(1), L = x.size(2), W = weight.size(1);
  at::Tensor dx = empty_bdl(B, D, L, cl, x.options());
  at::Tensor dweight = at::empty({D, W}, weight.options());
  at::Tensor dbias = bias.has_value() ? at::empty({D}, bias->options()) : at::empty({0}, weight.options());
  at::Tensor dinit = return_dinitial_states ? empty_bdl(B, D, W - 1, cl, x.options()) : at::empty({0}, x.options());
  if (B == 0 || D == 0 || L == 0) {
    dweight.zero_();
    if (bias.has_value()) dbias.zero_();
    if (return_dinitial_states) {
      if (dfinal_states.has_value() && L == 0) {
        dinit.copy_(*dfinal_states);
      } else {
        dinit.zero_();
      }
    }
    return {dx, dweight, dbias, dinit};
  }
  const at::Tensor dout = in_layout(dout_in, cl);
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
  p.nparts = k::bwd_num_parts(p, cl);
  const int64_t kwp = k::bwd_padded_width(p.width);
  at::Tensor partial = at::empty({p.nparts * (kwp + 1) * D}, x.options().dtype(at::kFloat));
  p.partial = partial.data_ptr<float>();
  k::run_bwd(p, cl, at::cuda::getCurrentCUDAStream());
  return {dx, dweight, dbias, dinit};
}

at::Tensor update_cuda_3d(const at::Tensor& x, at::Tensor& conv_state, const at::Tensor& weight,
                          const std::optional<at::Tensor>& bias, bool silu,
                          const std::optional<at::Tensor>& cache_seqlens,
                          const std::optional<at::Tensor>& conv_state_indices) {
  check_update_args(x, conv_state, weight, bias, cache_seqlens, conv_state_indices, kCudaMaxWidth);
  check_cuda(x);
  check_sizes(x);
  TORCH_CHECK_VALUE(x.size(2) <= INT32_MAX && conv_state.size(0) <= INT32_MAX && conv_state.size(2) <= INT32_MAX,
                    "update: seqlen, cache size and state_len must be below 2^31");
  const c10::cuda::OptionalCUDAGuard guard(x.device());
  const int64_t B = x.size(0), D = x.size(1), L = x.size(2);
  at::Tensor out = empty_bdl(B, D, L, is_channel_last(x), x.options());
  if (B == 0 || D == 0 || L == 0) return out;
  k::UpdateParams p;
  p.batch = static_cast<int>(B);
  p.dim = static_cast<int>(D);
  p.seqlen = static_cast<int>(L);
  p.state_len = static_cast<int>(conv_state.size(2));
  p.state_batch = static_cast<int>(conv_state.size(0));
  fill_x_weight_bias(p, x, weight, bias, silu);
  bind_bdl(conv_state, p.state, p.st_bs, p.st_cs, p.st_ls);
  bind_bdl(out, p.out, p.out_bs, p.out_cs, p.out_ls);
  at::Tensor cs, idx;
  if (cache_seqlens.has_value()) {
    cs = cache_seqlens->contiguous();
    p.cache_seqlens = cs.data_ptr<int32_t>();
  }
  if (conv_state_indices.has_value()) {
    idx = conv_state_indices->contiguous();
    p.state_indices = idx.data_ptr<int32_t>();
  }
  k::run_update(p, at::cuda::getCurrentCUDAStream());
  return out;
}

// x (batch, dim, seqlen), or (batch, dim) for one token (then out is (batch, dim)): decoders call
// with 2-D x, and taking it here saves the Python wrapper two view calls per token.
at::Tensor update_cuda(const at::Tensor& x, at::Tensor& conv_state, const at::Tensor& weight,
                       const std::optional<at::Tensor>& bias, bool silu, const std::optional<at::Tensor>& cache_seqlens,
                       const std::optional<at::Tensor>& conv_state_indices) {
  if (x.dim() == 2) {
    return update_cuda_3d(x.unsqueeze(-1), conv_state, weight, bias, silu, cache_seqlens, conv_state_indices)
        .squeeze(-1);
  }
  return update_cuda_3d(x, conv_state, weight, bias, silu, cache_seqlens, conv_state_indices);
}

}  // namespace
}  // namespace cuda
}  // namespace causal_conv1d

TORCH_LIBRARY_IMPL(causal_conv1d, CUDA, m) {
  m.impl("fwd", &causal_conv1d::cuda::fwd_cuda);
  m.impl("bwd", &causal_conv1d::cuda::bwd_cuda);
  m.impl("update", &causal_conv1d::cuda::update_cuda);
}
