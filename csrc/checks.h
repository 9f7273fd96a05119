// Argument validation and layout helpers shared by the CPU and the CUDA implementations of the
// causal_conv1d ops (schemas in csrc/ops.cpp, docs/ARCHITECTURE.md "Torch ops").
//
// Every message names the argument and what was expected (the checks of torch_api.h, in both the
// stable-ABI and the legacy build; the stable build's messages carry the type as a tag):
//   CC1D_CHECK_TYPE  -> TypeError   (wrong dtype)
//   CC1D_CHECK_VALUE -> ValueError  (wrong shape, width, layout, incompatible options)
//   CC1D_CHECK       -> RuntimeError (tensors on different devices)
//
// Conventions (both backends follow them, and the fake kernels in causal_conv1d/_ops.py mirror
// them, so real and fake outputs have the same strides):
//   * x is (batch, dim, seqlen), channel-first (x.stride(2) == 1) or channel-last
//     (x.stride(1) == 1, a (batch, seqlen, dim) tensor transposed). is_channel_last() decides.
//   * out / dx / final_states / dinitial_states are allocated with empty_bdl() in x's layout.
//   * weight and bias are read through their strides; no layout requirement.
//
// The signatures below are stable: the CUDA implementation includes this header.
#pragma once

#include "torch_api.h"

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <vector>

namespace causal_conv1d {

constexpr int64_t kMinWidth = 2;
constexpr int64_t kMaxWidth = 8;  // the CPU kernels support 2..8; a backend may pass a lower max

// ---------------------------------------------------------------------------------------------
// Layout helpers

// True when x (batch, dim, seqlen) is channel-last: dim is the unit-stride axis and seqlen is not.
// A tensor where both strides are 1 (seqlen == 1 or dim == 1) counts as channel-first.
inline bool is_channel_last(const Tensor& x) {
  return x.stride(2) != 1 && x.stride(1) == 1;
}

// A new (batch, dim, seqlen) tensor in the given layout, densely packed.
// dtype: its scalar type; like: a tensor on the device to allocate on.
// Channel-last: the strides of a (batch, seqlen, dim) tensor transposed, allocated as such (not a view).
inline Tensor empty_bdl(int64_t batch, int64_t dim, int64_t seqlen, bool channel_last, ScalarType dtype,
                        const Tensor& like) {
  if (channel_last) {
    const int64_t ds = dim > 1 ? dim : 1, ls = seqlen > 1 ? seqlen : 1;  // as ATen strides size-0/1 axes
    return alloc_strided({batch, dim, seqlen}, {ls * ds, 1, ds}, dtype, like);
  }
  return alloc_empty({batch, dim, seqlen}, dtype, like);
}

// ---------------------------------------------------------------------------------------------
// Single-argument checks

inline bool is_float_type(ScalarType t, bool allow_float64 = false) {
  return t == ScalarType::Float || t == ScalarType::Half || t == ScalarType::BFloat16 || (allow_float64 && t == ScalarType::Double);
}

// allow_float64: the CPU kernels also take float64 (for gradcheck and fp64 references).
inline void check_float_dtype(const Tensor& t, const char* name, bool allow_float64 = false) {
  CC1D_CHECK_TYPE(is_float_type(t.scalar_type(), allow_float64), name, " must be float32, float16 or bfloat16",
                   allow_float64 ? " (or float64 on the CPU)" : "", ", got ", t.scalar_type());
}

inline void check_same_device(const Tensor& t, const Tensor& x, const char* name) {
  CC1D_CHECK(t.device() == x.device(), name, " must be on the same device as x (", device_str(x),
             "), got ", device_str(t));
}

inline void check_int32(const Tensor& t, const char* name) {
  CC1D_CHECK_TYPE(t.scalar_type() == ScalarType::Int, name, " must be int32 (torch.int32), got ",
                   t.scalar_type(), t.scalar_type() == ScalarType::Long ? "; convert it with .to(torch.int32)" : "");
}

template <typename Sizes>
inline void check_shape(const Tensor& t, const char* name, const Sizes& expected, const char* expected_desc) {
  CC1D_CHECK_VALUE(same_sizes(t.sizes(), expected), name, " must have shape ", expected_desc, " = ",
                   fmt_sizes(expected), ", got ", fmt_sizes(t.sizes()));
}

// check_shape(t, "bias", {dim}, "(dim,)"): the expected sizes as a braced list.
template <size_t N>
inline void check_shape(const Tensor& t, const char* name, const int64_t (&expected)[N], const char* expected_desc) {
  check_shape<const int64_t[N]>(t, name, expected, expected_desc);
}

// x-like (batch, dim, seqlen) tensors: channel-first or channel-last.
inline void check_bdl_layout(const Tensor& t, const char* name) {
  CC1D_CHECK_VALUE(t.stride(2) == 1 || t.stride(1) == 1, name,
                    " must be channel-first (stride(2) == 1) or channel-last (stride(1) == 1), got strides ",
                    fmt_sizes(t.strides()), "; call .contiguous() first");
}

// A tensor an op writes into (conv_state): no two elements may share memory. The axes of more than
// one element, sorted by stride, must each step over the whole extent of the axes below them; an
// expanded view (stride 0, e.g. torch.randn(1, 8, 3).expand(3, 8, 3)) fails, and so would any layout
// whose rows interleave. Writing into such a tensor would make every alias see the last row's state.
inline bool overlaps_itself(const Tensor& t) {
  std::vector<std::pair<int64_t, int64_t>> axes;  // (stride, size) of the axes with more than one element
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.size(d) > 1) axes.emplace_back(t.stride(d), t.size(d));
  }
  std::sort(axes.begin(), axes.end());
  int64_t extent = 1;  // elements spanned by the axes so far
  for (const auto& [stride, size] : axes) {
    if (stride < extent) return true;
    extent = stride * size;
  }
  return false;
}

inline void check_writable(const Tensor& t, const char* name) {
  CC1D_CHECK_VALUE(!overlaps_itself(t), name, " is written in place and must not overlap itself, got shape ",
                    fmt_sizes(t.sizes()), " with strides ", fmt_sizes(t.strides()),
                    " (an expanded or stride-0 view); pass a tensor that owns its memory, e.g. ", name, ".clone()");
}

inline void check_width(int64_t width, int64_t max_width) {
  CC1D_CHECK_VALUE(width >= kMinWidth && width <= max_width, "weight must have width (weight.shape[1]) between ",
                    kMinWidth, " and ", max_width, ", got ", width);
}

// Tensors that hold x's values (dout, states): x's dtype.
inline void check_dtype_like_x(const Tensor& t, const Tensor& x, const char* name) {
  CC1D_CHECK_TYPE(t.scalar_type() == x.scalar_type(), name, " must have x's dtype (", x.scalar_type(), "), got ",
                   t.scalar_type());
}

// weight (dim, width) for a 3-D x: float dtype, x's device, dim = x.shape[1], width in range.
inline void check_weight(const Tensor& x, const Tensor& weight, int64_t max_width, bool allow_float64) {
  CC1D_CHECK_VALUE(weight.dim() == 2, "weight must be 2-D (dim, width), got shape ", fmt_sizes(weight.sizes()));
  check_float_dtype(weight, "weight", allow_float64);
  check_same_device(weight, x, "weight");
  const int64_t dim = x.size(1);
  CC1D_CHECK_VALUE(weight.size(0) == dim, "weight must have shape (dim, width) with dim = x.shape[1] = ", dim,
                    ", got ", fmt_sizes(weight.sizes()));
  check_width(weight.size(1), max_width);
}

// bias (dim,), weight's dtype, x's device; None is fine.
inline void check_bias(const Tensor& x, const Tensor& weight, const OptTensor& bias) {
  if (!bias.has_value()) return;
  const Tensor& b = *bias;
  check_same_device(b, x, "bias");
  CC1D_CHECK_TYPE(b.scalar_type() == weight.scalar_type(), "bias must have weight's dtype (", weight.scalar_type(),
                   "), got ", b.scalar_type());
  check_shape(b, "bias", {x.size(1)}, "(dim,)");
}

// The fused residual of fwd / packed_fwd (out = act(conv(x) + bias) + residual): x's shape, dtype
// and device, any strides; None is fine.
inline void check_residual(const Tensor& x, const OptTensor& residual) {
  if (!residual.has_value()) return;
  const Tensor& r = *residual;
  check_same_device(r, x, "residual");
  check_dtype_like_x(r, x, "residual");
  check_shape(r, "residual", x.sizes(), "x.shape");
}

// t (batch, dim, seqlen) with its unit stride on x's unit-stride axis (dout, residual: the kernels
// read them along that axis): t itself, or a copy in x's layout.
inline Tensor in_layout(const Tensor& t, bool channel_last) {
  const bool ok = channel_last ? t.stride(1) == 1 : t.stride(2) == 1;
  if (ok) return t;
  Tensor r = empty_bdl(t.size(0), t.size(1), t.size(2), channel_last, t.scalar_type(), t);
  copy_into(r, t);
  return r;
}

// ---------------------------------------------------------------------------------------------
// Per-op checks. Each returns nothing and throws on the first problem.

// fwd(x, weight, bias, seq_idx, initial_states, return_final_states, silu)
// seq_idx with initial_states (upstream 1.7.0): the initial state belongs to the sequence of the
// row's first token, seq_idx[b, 0]; a tap before position 0 reads it iff seq_idx[b, t] == seq_idx[b, 0].
inline void check_fwd_args(const Tensor& x, const Tensor& weight, const OptTensor& bias,
                           const OptTensor& seq_idx,
                           const OptTensor& initial_states, bool return_final_states,
                           int64_t max_width = kMaxWidth, bool allow_float64 = false) {
  CC1D_CHECK_VALUE(x.dim() == 3, "x must be 3-D (batch, dim, seqlen), got shape ", fmt_sizes(x.sizes()));
  check_float_dtype(x, "x", allow_float64);
  check_weight(x, weight, max_width, allow_float64);
  const int64_t batch = x.size(0), dim = x.size(1), width = weight.size(1);
  check_bdl_layout(x, "x");
  check_bias(x, weight, bias);
  if (seq_idx.has_value()) {
    const Tensor& s = *seq_idx;
    check_same_device(s, x, "seq_idx");
    check_int32(s, "seq_idx");
    check_shape(s, "seq_idx", {batch, x.size(2)}, "(batch, seqlen)");
    CC1D_CHECK_VALUE(!return_final_states, "return_final_states must be False when seq_idx is given");
  }
  if (initial_states.has_value()) {
    const Tensor& s = *initial_states;
    check_same_device(s, x, "initial_states");
    check_dtype_like_x(s, x, "initial_states");
    check_shape(s, "initial_states", {batch, dim, width - 1}, "(batch, dim, width - 1)");
  }
}

// bwd(x, weight, bias, dout, seq_idx, initial_states, dfinal_states, return_dinitial_states, silu)
inline void check_bwd_args(const Tensor& x, const Tensor& weight, const OptTensor& bias,
                           const Tensor& dout, const OptTensor& seq_idx,
                           const OptTensor& initial_states,
                           const OptTensor& dfinal_states, bool return_dinitial_states,
                           int64_t max_width = kMaxWidth, bool allow_float64 = false) {
  check_fwd_args(x, weight, bias, seq_idx, initial_states, /*return_final_states=*/false, max_width, allow_float64);
  check_same_device(dout, x, "dout");
  check_dtype_like_x(dout, x, "dout");
  check_shape(dout, "dout", x.sizes(), "x.shape");
  check_bdl_layout(dout, "dout");
  const int64_t width = weight.size(1);
  if (dfinal_states.has_value()) {
    const Tensor& s = *dfinal_states;
    CC1D_CHECK_VALUE(!seq_idx.has_value(), "dfinal_states must be None when seq_idx is given");
    check_same_device(s, x, "dfinal_states");
    check_dtype_like_x(s, x, "dfinal_states");
    check_shape(s, "dfinal_states", {x.size(0), x.size(1), width - 1}, "(batch, dim, width - 1)");
  }
  CC1D_CHECK_VALUE(!return_dinitial_states || initial_states.has_value(),
                    "return_dinitial_states=True needs initial_states");
}

// update(x, conv_state, weight, bias, silu, cache_seqlens, conv_state_indices); x is 3-D, or also
// 2-D (batch, dim) with allow_token (a backend that reads a 2-D x itself; others unsqueeze it first).
inline void check_update_args(const Tensor& x, const Tensor& conv_state, const Tensor& weight,
                              const OptTensor& bias,
                              const OptTensor& cache_seqlens,
                              const OptTensor& conv_state_indices,
                              int64_t max_width = kMaxWidth, bool allow_float64 = false,
                              bool allow_token = false) {
  const int64_t xdim = x.dim();
  CC1D_CHECK_VALUE(xdim == 3 || (allow_token && xdim == 2), "x must be (batch, dim) or (batch, dim, seqlen), got shape ",
                   fmt_sizes(x.sizes()));
  check_float_dtype(x, "x", allow_float64);
  check_weight(x, weight, max_width, allow_float64);
  const int64_t batch = x.size(0), dim = x.size(1), width = weight.size(1);
  check_bias(x, weight, bias);
  check_same_device(conv_state, x, "conv_state");
  check_dtype_like_x(conv_state, x, "conv_state");
  CC1D_CHECK_VALUE(conv_state.dim() == 3, "conv_state must be 3-D (batch or cache size, dim, state_len), got shape ",
                    fmt_sizes(conv_state.sizes()));
  CC1D_CHECK_VALUE(conv_state.size(1) == dim, "conv_state must have dim = x.shape[1] = ", dim,
                    " in its second axis, got shape ", fmt_sizes(conv_state.sizes()));
  CC1D_CHECK_VALUE(conv_state.size(2) >= width - 1, "conv_state must have state_len (shape[2]) >= width - 1 = ",
                    width - 1, ", got shape ", fmt_sizes(conv_state.sizes()));
  check_writable(conv_state, "conv_state");
  if (conv_state_indices.has_value()) {
    const Tensor& idx = *conv_state_indices;
    check_same_device(idx, x, "conv_state_indices");
    check_int32(idx, "conv_state_indices");
    check_shape(idx, "conv_state_indices", {batch}, "(batch,)");
  } else {
    CC1D_CHECK_VALUE(conv_state.size(0) == batch, "conv_state must have batch = x.shape[0] = ", batch,
                      " rows when conv_state_indices is None, got shape ", fmt_sizes(conv_state.sizes()));
  }
  if (cache_seqlens.has_value()) {
    const Tensor& c = *cache_seqlens;
    check_same_device(c, x, "cache_seqlens");
    check_int32(c, "cache_seqlens");
    check_shape(c, "cache_seqlens", {batch}, "(batch,)");
  }
}

// ---------------------------------------------------------------------------------------------
// Packed sequences (packed_fwd / packed_bwd; semantics: docs/package.md, "Packed sequences").
// x is (1, dim, total_tokens) in either layout; cu_seqlens int32 (n + 1,): sequence i is tokens
// [cu_seqlens[i], cu_seqlens[i + 1]); per-sequence states (n, dim, width - 1). Only shapes, dtypes
// and devices are checked here: the values of cu_seqlens live on the device for the CUDA kernels
// (the CPU op checks them too: check_cu_seqlens_values below). Returns n.

// A 1-D int32 cu_seqlens with n + 1 >= 1 entries on x's device.
inline int64_t check_cu_seqlens(const Tensor& x, const Tensor& cu_seqlens) {
  check_same_device(cu_seqlens, x, "cu_seqlens");
  check_int32(cu_seqlens, "cu_seqlens");
  CC1D_CHECK_VALUE(cu_seqlens.dim() == 1 && cu_seqlens.size(0) >= 1,
                   "cu_seqlens must be 1-D (number of sequences + 1,), got shape ", fmt_sizes(cu_seqlens.sizes()));
  return cu_seqlens.size(0) - 1;
}

// Per-sequence states (n, dim, width - 1) in x's dtype on x's device.
inline void check_packed_states(const Tensor& s, const Tensor& x, int64_t n, int64_t width, const char* name) {
  check_same_device(s, x, name);
  check_dtype_like_x(s, x, name);
  check_shape(s, name, {n, x.size(1), width - 1}, "(len(cu_seqlens) - 1, dim, width - 1)");
}

// packed_fwd(x, weight, bias, cu_seqlens, initial_states, return_final_states, silu)
inline int64_t check_packed_fwd_args(const Tensor& x, const Tensor& weight, const OptTensor& bias,
                                     const Tensor& cu_seqlens, const OptTensor& initial_states,
                                     int64_t max_width = kMaxWidth, bool allow_float64 = false) {
  CC1D_CHECK_VALUE(x.dim() == 3 && x.size(0) == 1,
                   "x must be (1, dim, total_tokens) with cu_seqlens (the sequences packed into one row), got shape ",
                   fmt_sizes(x.sizes()));
  check_float_dtype(x, "x", allow_float64);
  check_weight(x, weight, max_width, allow_float64);
  check_bdl_layout(x, "x");
  check_bias(x, weight, bias);
  const int64_t n = check_cu_seqlens(x, cu_seqlens);
  if (initial_states.has_value()) check_packed_states(*initial_states, x, n, weight.size(1), "initial_states");
  return n;
}

// packed_bwd(x, weight, bias, dout, cu_seqlens, initial_states, dfinal_states, return_dinitial_states, silu)
inline int64_t check_packed_bwd_args(const Tensor& x, const Tensor& weight, const OptTensor& bias,
                                     const Tensor& dout, const Tensor& cu_seqlens,
                                     const OptTensor& initial_states, const OptTensor& dfinal_states,
                                     bool return_dinitial_states, int64_t max_width = kMaxWidth,
                                     bool allow_float64 = false) {
  const int64_t n = check_packed_fwd_args(x, weight, bias, cu_seqlens, initial_states, max_width, allow_float64);
  check_same_device(dout, x, "dout");
  check_dtype_like_x(dout, x, "dout");
  check_shape(dout, "dout", x.sizes(), "x.shape");
  check_bdl_layout(dout, "dout");
  if (dfinal_states.has_value()) check_packed_states(*dfinal_states, x, n, weight.size(1), "dfinal_states");
  CC1D_CHECK_VALUE(!return_dinitial_states || initial_states.has_value(),
                   "return_dinitial_states=True needs initial_states");
  return n;
}

// The values of a host cu_seqlens (the CPU op): cu_seqlens[0] == 0, non-decreasing,
// cu_seqlens[n] == total_tokens.
inline void check_cu_seqlens_values(const int32_t* cu, int64_t stride, int64_t n, int64_t total) {
  CC1D_CHECK_VALUE(cu[0] == 0, "cu_seqlens[0] must be 0, got ", cu[0]);
  for (int64_t i = 0; i < n; ++i) {
    CC1D_CHECK_VALUE(cu[(i + 1) * stride] >= cu[i * stride], "cu_seqlens must be non-decreasing, got cu_seqlens[",
                     i, "] = ", cu[i * stride], " > cu_seqlens[", i + 1, "] = ", cu[(i + 1) * stride]);
  }
  CC1D_CHECK_VALUE(cu[n * stride] == total, "cu_seqlens[", n, "] = ", cu[n * stride],
                   " must equal total_tokens (x.shape[2]) = ", total, ": the sequence lengths must sum to x's tokens");
}

}  // namespace causal_conv1d
