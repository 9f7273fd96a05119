// CUDA implementations of the packed-sequence ops packed_fwd and packed_bwd (schemas: csrc/ops.cpp;
// checks: csrc/checks.h; semantics: docs/package.md, "Packed sequences"). Shape / dtype checks on
// the host only; nothing here reads device memory, so neither op synchronises (CUDA-graph capturable).
//
// packed_fwd, channel-last without states, runs on the channel-last fast forward with cu_seqlens
// (fwd_cl_fast.cu, path packed_fwd_cl_fast); otherwise it is the serving prefill (varlen_fwd's dispatch table and kernels, varlen.cuh) with one
// request per sequence on cache line i, every line both an initial and a final state: the
// final_states buffer is filled with initial_states first (the varlen kernels read a request's
// initial window from its line and write its final window back, in place), and has_initial_state
// is cu_seqlens + 1 (cu_seqlens[i + 1] > cu_seqlens[i] >= 0 for every request with tokens: nonzero
// exactly where the kernels read it; an empty sequence touches no line and keeps its initial state,
// which is its final state). Without initial_states the line starts from zeros and is zero-filled
// when the final states are returned (an empty sequence's final state is zeros). The conv is one
// launch; the state copy (or zero fill) is a second one, of n * dim * (width - 1) elements. A residual
// (1, dim, total_tokens) goes to the kernels as VarlenParams::res, or ConvParams::res on the fast
// forward (in x's layout: copied when its unit stride is elsewhere); each adds it at its output store.
//
// packed_bwd: channel-last without states on the channel-last fast backward (bwd_cl_fast.cu: its
// kernel and the weight-gradient reduce); otherwise one kernel (packed_bwd.cu).
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
using namespace cuda_ops;  // kCudaMaxWidth, check_cuda, bind_*, fill_weight_bias, launch_varlen_fwd

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

}  // namespace

std::tuple<Tensor, Tensor> packed_fwd_cuda(const Tensor& x, const Tensor& weight, const OptTensor& bias,
                                           const Tensor& cu_seqlens, const OptTensor& initial_states,
                                           bool return_final_states, bool silu, const OptTensor& residual) {
  const int64_t n = check_packed_fwd_args(x, weight, bias, cu_seqlens, initial_states, kCudaMaxWidth);
  check_residual(x, residual);
  check_cuda(x);
  check_packed_sizes(x, n);
  const CudaDeviceGuard guard(x);
  const bool cl = is_channel_last(x);
  const int64_t D = x.size(1), T = x.size(2), W = weight.size(1);
  const ScalarType xt = x.scalar_type();
  Tensor out = empty_bdl(1, D, T, cl, xt, x);
  const Tensor none = alloc_empty({0}, xt, x);
  // the final-states buffer (the varlen kernels' cache): initial_states, or zeros when returned
  auto make_states = [&]() {
    Tensor states = empty_bdl(n, D, W - 1, cl, xt, x);
    if (initial_states.has_value()) {
      copy_into(states, *initial_states);
    } else if (return_final_states) {
      zero_fill(states);
    }
    return states;
  };
  if (D == 0 || T == 0 || n == 0) {
    if (out.numel() > 0) {  // no sequence: every token lies outside them (0, plus the residual)
      if (residual.has_value()) {
        copy_into(out, *residual);
      } else {
        zero_fill(out);
      }
    }
    return {out, return_final_states ? make_states() : none};
  }
  const Tensor q = as_contiguous(cu_seqlens);
  // the residual in x's layout: the kernels read it along x's unit-stride axis
  const Tensor res = residual.has_value() ? in_layout(*residual, cl) : none;
  if (cl && !initial_states.has_value() && !return_final_states) {  // the channel-last fast forward
    k::ConvParams c;
    c.batch = 1;
    c.dim = static_cast<int>(D);
    c.seqlen = T;
    bind_bdl(x, c.x, c.x_bs, c.x_cs, c.x_ls);
    bind_bdl(out, c.out, c.out_bs, c.out_cs, c.out_ls);
    fill_weight_bias(c, x, weight, bias, silu);
    c.channel_last = true;
    c.num_sms = sm_count(device_index(x));
    c.pdl = pdl_capable(device_index(x));
    c.cu_seqlens = q.const_data_ptr<int32_t>();
    c.nseq = static_cast<int>(n);
    if (residual.has_value()) bind_bdl(res, c.res, c.r_bs, c.r_cs, c.r_ls);
    if (k::run_packed_fwd_cl_fast(c, current_cuda_stream(device_index(x)))) return {out, none};
  }
  const Tensor states = make_states();
  k::VarlenParams p;
  const int32_t* qp = q.const_data_ptr<int32_t>();
  p.qsl = qp;
  p.has_init = initial_states.has_value() ? qp + 1 : nullptr;  // see the file comment
  if (residual.has_value()) bind_2d(res, p.res, p.r_ds, p.r_ts);
  // the lines are 0 .. n - 1: nothing is skipped (pad_slot_id -1)
  launch_varlen_fwd(p, x, out, weight, bias, silu, states, n, /*pad_slot_id=*/-1);
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
  p.nseq = static_cast<int>(n);
  p.total = T;
  p.channel_last = cl;
  p.vec_ok = !cl && cf_vec_ok(x) && cf_vec_ok(dout) && cf_vec_ok(dx);
  p.cu = q.const_data_ptr<int32_t>();
  fill_weight_bias(p, x, weight, bias, silu);
  if (bias.has_value()) p.dbias = dbias.data_ptr();
  bind_2d(x, p.x, p.x_cs, p.x_ts);
  bind_2d(dout, p.dout, p.do_cs, p.do_ts);
  bind_2d(dx, p.dx, p.dx_cs, p.dx_ts);
  if (initial_states.has_value()) bind_bdl(*initial_states, p.init, p.i_ns, p.i_cs, p.i_ls);
  if (dfinal_states.has_value()) bind_bdl(*dfinal_states, p.dfinal, p.df_ns, p.df_cs, p.df_ls);
  if (return_dinitial_states) bind_bdl(dinit, p.dinit, p.di_ns, p.di_cs, p.di_ls);
  p.dweight = dweight.data_ptr();
  p.num_sms = sm_count(device_index(x));
  p.pdl = pdl_capable(device_index(x));
  // The path first (dispatch.cu): the workspace is the size the chosen kernels write.
  const causal_conv1d::KernelPath path = k::select_packed_bwd(p);
  p.nparts = k::packed_bwd_num_parts(path, p);
  Tensor partial;
  if (p.nparts > 0) {
    partial = alloc_empty({p.nparts * (k::bwd_padded_width(p.width) + 1) * D}, ScalarType::Float, x);
    p.partial = partial.mutable_data_ptr<float>();
  }
  k::run_packed_bwd(path, p, current_cuda_stream(device_index(x)));
  return {dx, dweight, dbias, dinit};
}

}  // namespace cuda_packed
}  // namespace causal_conv1d
