// CUDA implementations of the serving ops varlen_fwd and spec_update (schemas: csrc/ops.cpp;
// checks: csrc/varlen_checks.h; kernels: cuda/varlen_*.cu, cuda/spec_update_*.cu; semantics:
// docs/serving.md). Shape/dtype checks only on the host; nothing here reads device memory, so both
// ops are one kernel launch with no synchronisation (CUDA-graph capturable).
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
using namespace cuda_ops;  // kCudaMaxWidth, check_cuda, bind_*, fill_weight_bias, launch_varlen_fwd

// Contiguous int32 copies of the optional index tensors live until the launch (a no-op view when
// already contiguous), and their pointers.
struct IndexArgs {
  Tensor idx, init_idx, last_idx, first_idx, computed;

  void fill(k::CacheIndex& ci, const OptTensor& table, const OptTensor& init, const OptTensor& last,
            const OptTensor& first, const OptTensor& comp, int64_t block) {
    if (table.has_value()) {
      idx = *table;  // any strides: read through ci_rs / ci_cs
      ci.idx = idx.const_data_ptr<int32_t>();
      ci.ci_rs = idx.stride(0);
      ci.ci_cs = idx.dim() == 2 ? idx.stride(1) : 0;
      ci.cols = idx.dim() == 2 ? idx.size(1) : 1;
    }
    if (!last.has_value()) return;
    auto bind = [](Tensor& keep, const OptTensor& t) -> const int32_t* {
      if (!t.has_value()) return nullptr;
      keep = as_contiguous(*t);
      return keep.const_data_ptr<int32_t>();
    };
    ci.last_idx = bind(last_idx, last);
    ci.init_idx = bind(init_idx, init);
    ci.first_idx = bind(first_idx, first);
    ci.computed = bind(computed, comp);
    ci.block = block;
  }
};

}  // namespace

Tensor varlen_fwd_cuda(const Tensor& x, const Tensor& weight, const OptTensor& bias, Tensor& conv_states,
                       const Tensor& query_start_loc, const OptTensor& cache_indices,
                       const OptTensor& has_initial_state, bool silu, int64_t pad_slot_id,
                       const OptTensor& block_idx_first, const OptTensor& block_idx_last,
                       const OptTensor& initial_state_idx, const OptTensor& num_computed_tokens,
                       int64_t block_size_to_align) {
  const int64_t batch =
      check_varlen_fwd_args(x, weight, bias, conv_states, query_start_loc, cache_indices, has_initial_state,
                            block_idx_first, block_idx_last, initial_state_idx, num_computed_tokens,
                            block_size_to_align, kCudaMaxWidth, /*allow_float64=*/false);
  check_cuda(x);
  const int64_t D = x.size(0), T = x.size(1);
  CC1D_CHECK_VALUE(D <= INT32_MAX && batch <= INT32_MAX, "x must have dim below 2^31 and batch below 2^31");
  const CudaDeviceGuard guard(x);
  const bool cl = varlen_is_channel_last(x);
  Tensor out = empty_dt(D, T, cl, x.scalar_type(), x);
  if (D == 0 || T == 0) return out;
  const Tensor q = as_contiguous(query_start_loc);
  const Tensor hi =
      has_initial_state.has_value() ? as_contiguous(to_dtype(*has_initial_state, ScalarType::Int)) : Tensor();
  k::VarlenParams p;
  p.qsl = q.const_data_ptr<int32_t>();
  p.has_init = hi.defined() ? hi.const_data_ptr<int32_t>() : nullptr;
  IndexArgs keep;
  keep.fill(p.ci, cache_indices, initial_state_idx, block_idx_last, block_idx_first, num_computed_tokens,
            block_size_to_align);
  launch_varlen_fwd(p, x, out, weight, bias, silu, conv_states, batch, pad_slot_id);
  return out;
}

// x (batch, dim, seqlen), (batch, dim) for one token, or (num_tokens, dim) with query_start_loc; out
// has x's shape (a 2-D x gives a contiguous 2-D out).
Tensor spec_update_cuda(const Tensor& x, Tensor& conv_state, const Tensor& weight, const OptTensor& bias, bool silu,
                        const OptTensor& conv_state_indices, const OptTensor& num_accepted_tokens,
                        int64_t pad_slot_id, const OptTensor& query_start_loc, int64_t max_query_len,
                        const OptTensor& block_idx_last, const OptTensor& initial_state_idx,
                        const OptTensor& retrieve_parent_token) {
  const int64_t batch = check_spec_update_args(x, conv_state, weight, bias, conv_state_indices, num_accepted_tokens,
                                               query_start_loc, max_query_len, block_idx_last, initial_state_idx,
                                               retrieve_parent_token, kCudaMaxWidth, /*allow_float64=*/false);
  check_cuda(x);
  const bool ragged = query_start_loc.has_value();
  const int64_t D = x.size(1);
  const int64_t L = ragged ? max_query_len : (x.dim() == 3 ? x.size(2) : 1);
  CC1D_CHECK_VALUE(D <= INT32_MAX && batch <= INT32_MAX && L <= INT32_MAX,
                   "spec_update: dim, batch and seqlen must be below 2^31, got x of shape ", fmt_sizes(x.sizes()));
  const CudaDeviceGuard guard(x);
  Tensor out = ragged ? alloc_empty({x.size(0), D}, x.scalar_type(), x) : empty_update_out(x, L);
  if (batch == 0 || D == 0 || x.numel() == 0) return out;
  const Tensor na = num_accepted_tokens.has_value() ? as_contiguous(*num_accepted_tokens) : Tensor();
  const Tensor q = ragged ? as_contiguous(*query_start_loc) : Tensor();
  k::SpecParams p;
  p.batch = static_cast<int>(batch);
  p.dim = static_cast<int>(D);
  p.seqlen = static_cast<int>(L);
  fill_weight_bias(p, x, weight, bias, silu);
  bind_cache(p, p.state, conv_state);
  if (ragged) {  // (num_tokens, dim): token stride in x_ls, no batch stride
    bind_2d(x, p.x, p.x_ls, p.x_cs);
    bind_2d(out, p.out, p.o_ls, p.o_cs);
    p.total = x.size(0);
    p.qsl = q.const_data_ptr<int32_t>();
  } else {
    bind_bdl(x, p.x, p.x_bs, p.x_cs, p.x_ls);
    bind_bdl(out, p.out, p.o_bs, p.o_cs, p.o_ls);
    if (L == 1) p.x_ls = p.o_ls = 0;  // one token: the token stride is never stepped
  }
  p.num_accepted = na.defined() ? na.const_data_ptr<int32_t>() : nullptr;
  Tensor pa;
  if (retrieve_parent_token.has_value()) {
    pa = *retrieve_parent_token;
    p.parent = pa.const_data_ptr<int32_t>();
    p.pa_bs = pa.stride(0);
    p.pa_ts = pa.stride(1);
  }
  IndexArgs keep;
  keep.fill(p.ci, conv_state_indices, initial_state_idx, block_idx_last, std::nullopt, std::nullopt, 0);
  p.pad_slot_id = pad_slot_id;
  p.num_sms = sm_count(device_index(x));
  k::run_spec_update(p, current_cuda_stream(device_index(x)));
  return out;
}

}  // namespace cuda_varlen
}  // namespace causal_conv1d
