// Argument checks and layout helpers of the serving ops (schemas: csrc/ops.cpp; semantics:
// docs/serving.md, vLLM's meaning of every argument):
//   varlen_fwd  -- prefill over a packed batch of requests with a state cache (and prefix caching)
//   spec_update -- decode step over one or a few new tokens per request (speculative decoding,
//                  ragged batches, tree drafts)
// Shared by the CPU (cpu/varlen_fwd.cpp, cpu/spec_update.cpp) and the CUDA (cuda/varlen_ops.cpp)
// implementations. Only what shapes and dtypes tell is checked here (on the host, no device sync);
// the values of the index tensors are checked by the CPU kernels and, on CUDA, by the Python API's
// validate=True (docs/serving.md, "Index values", says what the CUDA kernels do with bad values).
//
// Index tensors may be longer than the batch (an engine pads them to its CUDA-graph batch size):
// only their first `batch` entries (rows) are read. The state cache may have another dtype than x
// (x is cast to it first, as in vLLM); float64 only where allow_float64 (the CPU).
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

// conv_states (num_cache_lines, dim, state_len): x's device, a float dtype (not necessarily x's),
// dim = x's dim, state_len >= min_state_len; any strides.
inline void check_state_cache(const Tensor& x, const Tensor& cs, int64_t dim, int64_t min_state_len,
                              const char* name, const char* why, bool allow_float64) {
  check_same_device(cs, x, name);
  CC1D_CHECK_TYPE(is_float_type(cs.scalar_type(), allow_float64), name, " must be float32, float16 or bfloat16",
                  allow_float64 ? " (or float64 on the CPU)" : "", ", got ", cs.scalar_type());
  CC1D_CHECK_VALUE(cs.dim() == 3, name, " must be 3-D (num_cache_lines, dim, state_len), got shape ",
                   fmt_sizes(cs.sizes()));
  CC1D_CHECK_VALUE(cs.size(1) == dim, name, " must have dim = ", dim, " in its second axis, got shape ",
                   fmt_sizes(cs.sizes()));
  CC1D_CHECK_VALUE(cs.size(2) >= min_state_len, name, " is too short: state_len (shape[2]) must be >= ", why, " = ",
                   min_state_len, ", got shape ", fmt_sizes(cs.sizes()));
  check_writable(cs, name);
}

// An int32 per-request index tensor (>= batch,) on x's device; only its first batch entries are read.
inline void check_index_vec(const Tensor& x, const Tensor& t, int64_t batch, const char* name) {
  check_same_device(t, x, name);
  check_int32(t, name);
  CC1D_CHECK_VALUE(t.dim() == 1 && t.size(0) >= batch, name, " must be 1-D with at least batch = ", batch,
                   " entries (batch,), got shape ", fmt_sizes(t.sizes()));
}

inline void check_opt_index_vec(const Tensor& x, const OptTensor& t, int64_t batch, const char* name) {
  if (t.has_value()) check_index_vec(x, *t, batch, name);
}

// The cache-line table: 1-D (>= batch,) or, with prefix caching, 2-D (>= batch, max_blocks).
inline void check_cache_line_table(const Tensor& x, const Tensor& t, int64_t batch, bool prefix_caching,
                                   const char* name) {
  check_same_device(t, x, name);
  check_int32(t, name);
  if (prefix_caching) {
    CC1D_CHECK_VALUE(t.dim() == 2 && t.size(0) >= batch && t.size(1) >= 1, name,
                     " must be 2-D (batch, max_blocks) with at least batch = ", batch,
                     " rows and one column when block_idx_last_scheduled_token is given (prefix caching), got shape ",
                     fmt_sizes(t.sizes()));
  } else {
    CC1D_CHECK_VALUE(t.dim() == 1 && t.size(0) >= batch, name, " must be 1-D with at least batch = ", batch,
                     " entries (batch,), got shape ", fmt_sizes(t.sizes()),
                     t.dim() == 2 ? " (a 2-D table is for prefix caching: pass block_idx_last_scheduled_token, "
                                    "initial_state_idx and the other prefix-caching tensors)"
                                  : "");
  }
}

// The cache-line table argument of an op: when given, as check_cache_line_table; else no prefix
// caching, and request i uses line i of the cache (batch_desc: how the message names the batch).
inline void check_lines_arg(const Tensor& x, const OptTensor& table, const Tensor& cache, int64_t batch,
                            bool prefix_caching, const char* table_name, const char* cache_name,
                            const char* batch_desc) {
  if (table.has_value()) {
    check_cache_line_table(x, *table, batch, prefix_caching, table_name);
    return;
  }
  CC1D_CHECK_VALUE(!prefix_caching, table_name, " is required with block_idx_last_scheduled_token (prefix caching): "
                   "int32 (batch, max_blocks), got None");
  CC1D_CHECK_VALUE(cache.size(0) >= batch, cache_name, " must have at least ", batch_desc, batch, " cache lines when ",
                   table_name, " is None, got shape ", fmt_sizes(cache.sizes()));
}

// A prefix-caching tensor: required when block_idx_last_scheduled_token is given, refused without it.
inline void check_apc_vec(const Tensor& x, const OptTensor& t, int64_t batch, bool prefix_caching, const char* name) {
  if (prefix_caching) {
    CC1D_CHECK_VALUE(t.has_value(), name, " is required with block_idx_last_scheduled_token (prefix caching): "
                     "int32 (batch,), got None");
    check_index_vec(x, *t, batch, name);
  } else {
    CC1D_CHECK_VALUE(!t.has_value(), name, " is given but block_idx_last_scheduled_token is None: prefix caching "
                     "is switched on by block_idx_last_scheduled_token; pass it too, or pass ", name, "=None");
  }
}

inline void check_weight_bias_dt(const Tensor& x, const Tensor& weight, const OptTensor& bias, int64_t dim,
                                 const char* dim_desc, int64_t max_width, bool allow_float64) {
  CC1D_CHECK_VALUE(weight.dim() == 2, "weight must be 2-D (dim, width), got shape ", fmt_sizes(weight.sizes()));
  check_float_dtype(weight, "weight", allow_float64);
  check_same_device(weight, x, "weight");
  CC1D_CHECK_VALUE(weight.size(0) == dim, "weight must have shape (dim, width) with dim = ", dim_desc, " = ", dim,
                   ", got ", fmt_sizes(weight.sizes()));
  check_width(weight.size(1), max_width);
  if (bias.has_value()) {
    check_same_device(*bias, x, "bias");
    CC1D_CHECK_TYPE(bias->scalar_type() == weight.scalar_type(), "bias must have weight's dtype (",
                    weight.scalar_type(), "), got ", bias->scalar_type());
    check_shape(*bias, "bias", {dim}, "(dim,)");
  }
}

inline int64_t check_query_start_loc(const Tensor& x, const Tensor& q) {
  check_same_device(q, x, "query_start_loc");
  check_int32(q, "query_start_loc");
  CC1D_CHECK_VALUE(q.dim() == 1 && q.size(0) >= 1, "query_start_loc must be 1-D (batch + 1,), got shape ",
                   fmt_sizes(q.sizes()));
  return q.size(0) - 1;
}

// varlen_fwd(x, weight, bias, conv_states, query_start_loc, cache_indices, has_initial_state, silu,
// pad_slot_id, block_idx_first_scheduled_token, block_idx_last_scheduled_token, initial_state_idx,
// num_computed_tokens, block_size_to_align); returns batch = len(query_start_loc) - 1.
inline int64_t check_varlen_fwd_args(const Tensor& x, const Tensor& weight, const OptTensor& bias,
                                     const Tensor& conv_states, const Tensor& query_start_loc,
                                     const OptTensor& cache_indices, const OptTensor& has_initial_state,
                                     const OptTensor& block_idx_first, const OptTensor& block_idx_last,
                                     const OptTensor& initial_state_idx, const OptTensor& num_computed_tokens,
                                     int64_t block_size_to_align, int64_t max_width = kMaxWidth,
                                     bool allow_float64 = false) {
  CC1D_CHECK_VALUE(x.dim() == 2, "x must be 2-D (dim, total_tokens), got shape ", fmt_sizes(x.sizes()),
                   "; pass a (total_tokens, dim) tensor as x.T");
  check_float_dtype(x, "x", allow_float64);
  CC1D_CHECK_VALUE(x.stride(1) == 1 || x.stride(0) == 1, "x must be channel-first (stride(1) == 1) or channel-last "
                   "(stride(0) == 1), got strides ", fmt_sizes(x.strides()), "; call .contiguous() first");
  const int64_t dim = x.size(0);
  check_weight_bias_dt(x, weight, bias, dim, "x.shape[0] (x is (dim, total_tokens): pass a (total_tokens, dim) "
                       "tensor as x.T)", max_width, allow_float64);
  const int64_t width = weight.size(1);
  check_state_cache(x, conv_states, dim, width - 1, "conv_states", "width - 1", allow_float64);
  const int64_t batch = check_query_start_loc(x, query_start_loc);
  const bool apc = block_idx_last.has_value();
  check_lines_arg(x, cache_indices, conv_states, batch, apc, "cache_indices", "conv_states", "batch = ");
  if (has_initial_state.has_value()) {
    const Tensor& h = *has_initial_state;
    check_same_device(h, x, "has_initial_state");
    check_bool_or_int32(h, "has_initial_state");
    CC1D_CHECK_VALUE(h.dim() == 1 && h.size(0) >= batch, "has_initial_state must be 1-D with at least batch = ",
                     batch, " entries (batch,), got shape ", fmt_sizes(h.sizes()));
  }
  if (apc) check_index_vec(x, *block_idx_last, batch, "block_idx_last_scheduled_token");
  check_apc_vec(x, block_idx_first, batch, apc, "block_idx_first_scheduled_token");
  check_apc_vec(x, initial_state_idx, batch, apc, "initial_state_idx");
  check_apc_vec(x, num_computed_tokens, batch, apc, "num_computed_tokens");
  if (apc) {
    CC1D_CHECK_VALUE(block_size_to_align >= 1, "block_size_to_align must be >= 1 (the prefix-caching block size in "
                     "tokens) when block_idx_last_scheduled_token is given, got ", block_size_to_align);
  } else {
    CC1D_CHECK_VALUE(block_size_to_align >= 0, "block_size_to_align must be >= 0 (it is read only with prefix "
                     "caching), got ", block_size_to_align);
  }
  return batch;
}

// spec_update(x, conv_state, weight, bias, silu, conv_state_indices, num_accepted_tokens, pad_slot_id,
// query_start_loc, max_query_len, block_idx_last_scheduled_token, initial_state_idx,
// retrieve_parent_token); returns batch. x is (batch, dim) (one token), (batch, dim, seqlen), or with
// query_start_loc (num_tokens, dim) and batch = len(query_start_loc) - 1.
inline int64_t check_spec_update_args(const Tensor& x, const Tensor& conv_state, const Tensor& weight,
                                      const OptTensor& bias, const OptTensor& conv_state_indices,
                                      const OptTensor& num_accepted_tokens, const OptTensor& query_start_loc,
                                      int64_t max_query_len, const OptTensor& block_idx_last,
                                      const OptTensor& initial_state_idx, const OptTensor& retrieve_parent_token,
                                      int64_t max_width = kMaxWidth, bool allow_float64 = false) {
  const bool ragged = query_start_loc.has_value();
  const int64_t xdim = x.dim();
  if (ragged) {
    CC1D_CHECK_VALUE(xdim == 2, "x must be 2-D (num_tokens, dim) when query_start_loc is given, got shape ",
                     fmt_sizes(x.sizes()));
  } else {
    CC1D_CHECK_VALUE(xdim == 2 || xdim == 3, "x must be (batch, dim) or (batch, dim, seqlen) (or (num_tokens, dim) "
                     "with query_start_loc), got shape ", fmt_sizes(x.sizes()));
  }
  check_float_dtype(x, "x", allow_float64);
  const int64_t dim = x.size(1);
  check_weight_bias_dt(x, weight, bias, dim, "x.shape[1]", max_width, allow_float64);
  const int64_t width = weight.size(1);
  int64_t batch = 0, seqlen = 0;  // seqlen: the most tokens of one request
  if (ragged) {
    batch = check_query_start_loc(x, *query_start_loc);
    CC1D_CHECK_VALUE(conv_state_indices.has_value(), "conv_state_indices is required when query_start_loc is given "
                     "(as in vLLM): int32 (batch,), got None");
    CC1D_CHECK_VALUE(max_query_len >= 1 || (!num_accepted_tokens.has_value() && !retrieve_parent_token.has_value()),
                     "max_query_len must be >= 1 (the most tokens of one request) when query_start_loc is given with ",
                     num_accepted_tokens.has_value() ? "num_accepted_tokens" : "retrieve_parent_token", ", got ",
                     max_query_len);
    CC1D_CHECK_VALUE(max_query_len >= 1 || max_query_len == -1, "max_query_len must be >= 1, or -1 (not given), got ",
                     max_query_len);
    seqlen = max_query_len;
  } else {
    batch = x.size(0);
    seqlen = xdim == 2 ? 1 : x.size(2);
    CC1D_CHECK_VALUE(max_query_len == -1 || max_query_len == seqlen, "max_query_len is read only with "
                     "query_start_loc: pass -1 (or x's seqlen = ", seqlen, ") without it, got ", max_query_len);
  }
  if (num_accepted_tokens.has_value()) {
    // the history window starts at num_accepted_tokens - 1 >= 0, and the update writes H - 1 + n entries
    check_state_cache(x, conv_state, dim, width - 2 + seqlen, "conv_state",
                      ragged ? "width - 2 + max_query_len (num_accepted_tokens given)"
                             : "width - 2 + seqlen (num_accepted_tokens given)",
                      allow_float64);
  } else {
    check_state_cache(x, conv_state, dim, width - 1, "conv_state", "width - 1", allow_float64);
  }
  const bool apc = block_idx_last.has_value();
  check_lines_arg(x, conv_state_indices, conv_state, batch, apc, "conv_state_indices", "conv_state",
                  "batch = x.shape[0] = ");
  check_opt_index_vec(x, num_accepted_tokens, batch, "num_accepted_tokens");
  if (apc) check_index_vec(x, *block_idx_last, batch, "block_idx_last_scheduled_token");
  check_apc_vec(x, initial_state_idx, batch, apc, "initial_state_idx");
  if (retrieve_parent_token.has_value()) {
    const Tensor& r = *retrieve_parent_token;
    check_same_device(r, x, "retrieve_parent_token");
    check_int32(r, "retrieve_parent_token");
    CC1D_CHECK_VALUE(r.dim() == 2 && r.size(0) >= batch && r.size(1) >= seqlen,
                     "retrieve_parent_token must be 2-D (batch, seqlen) with at least batch = ", batch,
                     " rows and ", ragged ? "max_query_len" : "seqlen", " = ", seqlen, " columns, got shape ",
                     fmt_sizes(r.sizes()));
  }
  return batch;
}

}  // namespace causal_conv1d
