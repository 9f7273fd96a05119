// CUDA implementations of the packed-sequence ops packed_fwd and packed_bwd (schemas: csrc/ops.cpp;
// checks: csrc/checks.h; semantics: docs/package.md, "Packed sequences"). Shape / dtype checks on
// the host only; nothing here reads device memory, so neither op synchronises (CUDA-graph capturable).
//
// packed_fwd is the serving prefill (varlen_fwd's dispatch table and kernels, varlen.cuh) with one
// request per sequence on cache line i, every line both an initial and a final state: the
// final_states buffer is filled with initial_states first (the varlen kernels read a request's
// initial window from its line and write its final window back, in place), and has_initial_state
// is cu_seqlens + 1 (cu_seqlens[i + 1] > cu_seqlens[i] >= 0 for every request with tokens: nonzero
// exactly where the kernels read it; an empty sequence touches no line and keeps its initial state,
// which is its final state). Without initial_states the line starts from zeros and is zero-filled
// when the final states are returned (an empty sequence's final state is zeros). The conv is one
// launch; the state copy (or zero fill) is a second one, of n * dim * (width - 1) elements.
//
// packed_bwd: one kernel (packed_bwd.cu).
#include <cstdint>
#include <tuple>

#include "checks.h"
#include "cuda/common.cuh"
#include "cuda/op_helpers.h"
#include "cuda/packed.cuh"
#include "cuda/torch_api_cuda.h"
#include "cuda/varlen.cuh"

namespace causal_conv1d {
namespace cuda_packed {
namespace {

namespace k = causal_conv1d_cuda;
using namespace cuda_ops;  // kCudaMaxWidth, dtype_code, check_cuda

void check_packed_sizes(const Tensor& x, int64_t n) {
  CC1D_CHECK_VALUE(x.size(1) <= INT32_MAX && n <= INT32_MAX,
                   "x must have dim below 2^31 and cu_seqlens fewer than 2^31 sequences for the CUDA kernels, got x "
                   "of shape ", fmt_sizes(x.sizes()), " and ", n, " sequences");
}

// 16-byte accesses along the token axis of (1, dim, total) t at every 16-token chunk.
bool cf_vec_ok(const Tensor& t) {
  const int64_t v = 16 / static_cast<int64_t>(t.element_size());
  return t.stride(2) == 1 && k::aligned_to(t.data_ptr(), 16) && (t.size(1) <= 1 || t.stride(1) % v == 0);
}

// t (dout) with its unit stride on x's unit-stride axis: t itself, or a copy in x's layout.
Tensor in_layout(const Tensor& t, bool channel_last) {
  const bool ok = channel_last ? t.stride(1) == 1 : t.stride(2) == 1;
  if (ok) return t;
  Tensor r = empty_bdl(t.size(0), t.size(1), t.size(2), channel_last, t.scalar_type(), t);
  copy_into(r, t);
  return r;
}

std::tuple<Tensor, Tensor> packed_fwd_cuda(const Tensor& x, const Tensor& weight, const OptTensor& bias,
                                           const Tensor& cu_seqlens, const OptTensor& initial_states,
                                           bool return_final_states, bool silu) {
  const int64_t n = check_packed_fwd_args(x, weight, bias, cu_seqlens, initial_states, kCudaMaxWidth);
  check_cuda(x);
  check_packed_sizes(x, n);
  const CudaDeviceGuard guard(x);
  const bool cl = is_channel_last(x);
  const int64_t D = x.size(1), T = x.size(2), W = weight.size(1);
  const ScalarType xt = x.scalar_type();
  Tensor out = empty_bdl(1, D, T, cl, xt, x);
  Tensor states = empty_bdl(n, D, W - 1, cl, xt, x);
  if (initial_states.has_value()) {
    copy_into(states, *initial_states);
  } else if (return_final_states) {
    zero_fill(states);
  }
  const Tensor none = alloc_empty({0}, xt, x);
  if (D == 0 || T == 0 || n == 0) {
    if (out.numel() > 0) zero_fill(out);  // no sequence: every token lies outside them
    return {out, return_final_states ? states : none};
  }
  const Tensor q = as_contiguous(cu_seqlens);
  k::VarlenParams p;
  p.dim = static_cast<int>(D);
  p.width = static_cast<int>(W);
  p.batch = static_cast<int>(n);
  p.total = T;
  p.x_dtype = p.st_dtype = dtype_code(xt);
  p.w_dtype = dtype_code(weight.scalar_type());
  p.silu = silu;
  p.x = x.data_ptr();
  p.x_ds = x.stride(1);
  p.x_ts = x.stride(2);
  p.out = out.data_ptr();
  p.o_ds = out.stride(1);
  p.o_ts = out.stride(2);
  p.weight = weight.data_ptr();
  p.w_cs = weight.stride(0);
  p.w_ws = weight.stride(1);
  if (bias.has_value()) {
    p.bias = bias->data_ptr();
    p.b_dtype = dtype_code(bias->scalar_type());
    p.b_s = bias->stride(0);
  }
  p.states = states.data_ptr();
  p.st_bs = states.stride(0);
  p.st_cs = states.stride(1);
  p.st_ls = states.stride(2);
  p.lines = n;
  p.state_len = W - 1;
  const int32_t* qp = q.const_data_ptr<int32_t>();
  p.qsl = qp;
  p.has_init = initial_states.has_value() ? qp + 1 : nullptr;  // see the file comment
  p.pad_slot_id = -1;  // the lines are 0 .. n - 1: nothing is skipped
  p.num_sms = sm_count(device_index(x));
  k::run_varlen_fwd(p, current_cuda_stream(device_index(x)));
  return {out, return_final_states ? states : none};
}

std::tuple<Tensor, Tensor, Tensor, Tensor> packed_bwd_cuda(const Tensor& x, const Tensor& weight,
                                                           const OptTensor& bias, const Tensor& dout_in,
                                                           const Tensor& cu_seqlens, const OptTensor& initial_states,
                                                           const OptTensor& dfinal_states,
                                                           bool return_dinitial_states, bool silu) {
  const int64_t n = check_packed_bwd_args(x, weight, bias, dout_in, cu_seqlens, initial_states, dfinal_states,
                                          return_dinitial_states, kCudaMaxWidth);
  check_cuda(x);
  check_packed_sizes(x, n);
  const CudaDeviceGuard guard(x);
  const bool cl = is_channel_last(x);
  const int64_t D = x.size(1), T = x.size(2), W = weight.size(1);
  const ScalarType xt = x.scalar_type(), wt = weight.scalar_type();
  Tensor dx = empty_bdl(1, D, T, cl, xt, x);
  Tensor dweight = alloc_empty({D, W}, wt, x);
  Tensor dbias = bias.has_value() ? alloc_empty({D}, bias->scalar_type(), x) : alloc_empty({0}, wt, x);
  Tensor dinit = return_dinitial_states ? empty_bdl(n, D, W - 1, cl, xt, x) : alloc_empty({0}, xt, x);
  if (D == 0) return {dx, dweight, dbias, dinit};
  const Tensor dout = in_layout(dout_in, cl);
  const Tensor q = as_contiguous(cu_seqlens);
  k::PackedBwdParams p;
  p.dim = static_cast<int>(D);
  p.width = static_cast<int>(W);
  p.nseq = static_cast<int>(n);
  p.total = T;
  p.x_dtype = dtype_code(xt);
  p.w_dtype = dtype_code(wt);
  p.silu = silu;
  p.channel_last = cl;
  p.vec_ok = !cl && cf_vec_ok(x) && cf_vec_ok(dout) && cf_vec_ok(dx);
  p.cu = q.const_data_ptr<int32_t>();
  p.x = x.data_ptr();
  p.x_cs = x.stride(1);
  p.x_ts = x.stride(2);
  p.dout = dout.data_ptr();
  p.do_cs = dout.stride(1);
  p.do_ts = dout.stride(2);
  p.dx = dx.data_ptr();
  p.dx_cs = dx.stride(1);
  p.dx_ts = dx.stride(2);
  p.weight = weight.data_ptr();
  p.w_cs = weight.stride(0);
  p.w_ws = weight.stride(1);
  if (bias.has_value()) {
    p.bias = bias->data_ptr();
    p.b_dtype = dtype_code(bias->scalar_type());
    p.b_s = bias->stride(0);
    p.dbias = dbias.data_ptr();
  }
  if (initial_states.has_value()) {
    p.init = initial_states->data_ptr();
    p.i_ns = initial_states->stride(0);
    p.i_cs = initial_states->stride(1);
    p.i_ls = initial_states->stride(2);
  }
  if (dfinal_states.has_value()) {
    p.dfinal = dfinal_states->data_ptr();
    p.df_ns = dfinal_states->stride(0);
    p.df_cs = dfinal_states->stride(1);
    p.df_ls = dfinal_states->stride(2);
  }
  if (return_dinitial_states) {
    p.dinit = dinit.data_ptr();
    p.di_ns = dinit.stride(0);
    p.di_cs = dinit.stride(1);
    p.di_ls = dinit.stride(2);
  }
  p.dweight = dweight.data_ptr();
  k::run_packed_bwd(p, current_cuda_stream(device_index(x)));
  return {dx, dweight, dbias, dinit};
}

}  // namespace
}  // namespace cuda_packed
}  // namespace causal_conv1d

CC1D_LIBRARY_IMPL(causal_conv1d, CUDA, m) {
  m.impl("packed_fwd", CC1D_KERNEL(&causal_conv1d::cuda_packed::packed_fwd_cuda));
  m.impl("packed_bwd", CC1D_KERNEL(&causal_conv1d::cuda_packed::packed_bwd_cuda));
}
