// Argument checks and layout helpers of the serving ops (schemas: csrc/ops.cpp):
//   varlen_fwd  -- prefill over a packed batch of variable-length sequences with a state cache
//   spec_update -- decoding step over several new tokens per sequence (speculative decoding)
// Shared by the CPU (cpu/varlen_cpu.cpp) and the CUDA (cuda/varlen_ops.cpp) implementations. Only
// what shapes and dtypes tell is checked here (on the host, no device sync); the values of
// query_start_loc / cache_indices / num_accepted_tokens are checked by the CPU kernels and, on CUDA,
// by the Python API's validate=True (causal_conv1d/varlen.py documents what the kernels do with
// out-of-range values).
#pragma once

#include "checks.h"

namespace causal_conv1d {

// x (dim, total_tokens) is channel-last when the token axis is not unit-stride and dim is (a
// (total_tokens, dim) tensor transposed). Both strides 1: channel-first.
inline bool varlen_is_channel_last(const Tensor& x) { return x.stride(1) != 1 && x.stride(0) == 1; }

// A new (dim, total_tokens) tensor in the given layout, densely packed (not a view).
inline Tensor empty_dt(int64_t dim, int64_t total, bool channel_last, ScalarType dtype, const Tensor& like) {
  if (channel_last) {
    const int64_t ds = dim > 1 ? dim : 1;
    return alloc_strided({dim, total}, {1, ds}, dtype, like);
  }
  return alloc_empty({dim, total}, dtype, like);
}

inline void check_bool_or_int32(const Tensor& t, const char* name) {
  CC1D_CHECK_TYPE(t.scalar_type() == ScalarType::Bool || t.scalar_type() == ScalarType::Int, name,
                  " must be bool (or int32, nonzero = true), got ", t.scalar_type());
}

// conv_states (num_cache_lines, dim, state_len): x's dtype and device, dim = x's dim,
// state_len >= min_state_len; any strides.
inline void check_state_cache(const Tensor& x, const Tensor& cs, int64_t dim, int64_t min_state_len,
                              const char* name, const char* why) {
  check_same_device(cs, x, name);
  check_dtype_like_x(cs, x, name);
  CC1D_CHECK_VALUE(cs.dim() == 3, name, " must be 3-D (num_cache_lines, dim, state_len), got shape ",
                   fmt_sizes(cs.sizes()));
  CC1D_CHECK_VALUE(cs.size(1) == dim, name, " must have dim = ", dim, " in its second axis, got shape ",
                   fmt_sizes(cs.sizes()));
  CC1D_CHECK_VALUE(cs.size(2) >= min_state_len, name, " is too short: state_len (shape[2]) must be >= ", why, " = ",
                   min_state_len, ", got shape ", fmt_sizes(cs.sizes()));
}

// An optional per-sequence int32 index tensor of shape (batch,).
inline void check_per_seq_int32(const Tensor& x, const OptTensor& t, int64_t batch, const char* name) {
  if (!t.has_value()) return;
  check_same_device(*t, x, name);
  check_int32(*t, name);
  check_shape(*t, name, {batch}, "(batch,)");
}

// varlen_fwd(x, weight, bias, conv_states, query_start_loc, cache_indices, has_initial_state, silu, pad_slot_id)
inline void check_varlen_fwd_args(const Tensor& x, const Tensor& weight, const OptTensor& bias,
                                  const Tensor& conv_states, const Tensor& query_start_loc,
                                  const OptTensor& cache_indices, const OptTensor& has_initial_state,
                                  int64_t max_width = kMaxWidth, bool allow_float64 = false) {
  CC1D_CHECK_VALUE(x.dim() == 2, "x must be 2-D (dim, total_tokens), got shape ", fmt_sizes(x.sizes()),
                   "; pass a (total_tokens, dim) tensor as x.T");
  check_float_dtype(x, "x", allow_float64);
  CC1D_CHECK_VALUE(x.stride(1) == 1 || x.stride(0) == 1, "x must be channel-first (stride(1) == 1) or channel-last "
                   "(stride(0) == 1), got strides ", fmt_sizes(x.strides()), "; call .contiguous() first");
  const int64_t dim = x.size(0);
  CC1D_CHECK_VALUE(weight.dim() == 2, "weight must be 2-D (dim, width), got shape ", fmt_sizes(weight.sizes()));
  check_float_dtype(weight, "weight", allow_float64);
  check_same_device(weight, x, "weight");
  CC1D_CHECK_VALUE(weight.size(0) == dim, "weight must have shape (dim, width) with dim = x.shape[0] = ", dim,
                   ", got ", fmt_sizes(weight.sizes()),
                   " (x is (dim, total_tokens): pass a (total_tokens, dim) tensor as x.T)");
  check_width(weight.size(1), max_width);
  const int64_t width = weight.size(1);
  if (bias.has_value()) {
    check_same_device(*bias, x, "bias");
    CC1D_CHECK_TYPE(bias->scalar_type() == weight.scalar_type(), "bias must have weight's dtype (",
                    weight.scalar_type(), "), got ", bias->scalar_type());
    check_shape(*bias, "bias", {dim}, "(dim,)");
  }
  check_state_cache(x, conv_states, dim, width - 1, "conv_states", "width - 1");
  check_same_device(query_start_loc, x, "query_start_loc");
  check_int32(query_start_loc, "query_start_loc");
  CC1D_CHECK_VALUE(query_start_loc.dim() == 1 && query_start_loc.size(0) >= 1,
                   "query_start_loc must be 1-D (batch + 1,), got shape ", fmt_sizes(query_start_loc.sizes()));
  const int64_t batch = query_start_loc.size(0) - 1;
  check_per_seq_int32(x, cache_indices, batch, "cache_indices");
  if (!cache_indices.has_value()) {
    CC1D_CHECK_VALUE(conv_states.size(0) >= batch, "conv_states must have at least batch = ", batch,
                     " cache lines when cache_indices is None, got shape ", fmt_sizes(conv_states.sizes()));
  }
  if (has_initial_state.has_value()) {
    const Tensor& h = *has_initial_state;
    check_same_device(h, x, "has_initial_state");
    check_bool_or_int32(h, "has_initial_state");
    check_shape(h, "has_initial_state", {batch}, "(batch,)");
  }
}

// spec_update(x, conv_state, weight, bias, silu, conv_state_indices, num_accepted_tokens, pad_slot_id);
// x is 3-D here (the op unsqueezes a 2-D x).
inline void check_spec_update_args(const Tensor& x, const Tensor& conv_state, const Tensor& weight,
                                   const OptTensor& bias, const OptTensor& conv_state_indices,
                                   const OptTensor& num_accepted_tokens, int64_t max_width = kMaxWidth,
                                   bool allow_float64 = false, bool allow_token = false) {
  // allow_token: a 2-D x (batch, dim) is one token (a backend that reads it itself; others unsqueeze it)
  const int64_t xdim = x.dim();
  CC1D_CHECK_VALUE(xdim == 3 || (allow_token && xdim == 2), "x must be (batch, dim) or (batch, dim, seqlen), got shape ",
                   fmt_sizes(x.sizes()));
  check_float_dtype(x, "x", allow_float64);
  check_weight(x, weight, max_width, allow_float64);
  check_bias(x, weight, bias);
  const int64_t batch = x.size(0), dim = x.size(1), seqlen = xdim == 2 ? 1 : x.size(2), width = weight.size(1);
  if (num_accepted_tokens.has_value()) {
    // the accepted part of the previous step's seqlen tokens ends at state_len - seqlen + a, a >= 1
    check_state_cache(x, conv_state, dim, width - 2 + seqlen, "conv_state", "width - 2 + seqlen (num_accepted_tokens given)");
  } else {
    check_state_cache(x, conv_state, dim, width - 1, "conv_state", "width - 1");
  }
  check_per_seq_int32(x, conv_state_indices, batch, "conv_state_indices");
  if (!conv_state_indices.has_value()) {
    CC1D_CHECK_VALUE(conv_state.size(0) == batch, "conv_state must have batch = x.shape[0] = ", batch,
                     " rows when conv_state_indices is None, got shape ", fmt_sizes(conv_state.sizes()));
  }
  check_per_seq_int32(x, num_accepted_tokens, batch, "num_accepted_tokens");
}

}  // namespace causal_conv1d
