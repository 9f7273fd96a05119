// Device helpers shared by the serving kernels (varlen_general.cu, varlen_cl_fast.cu,
// varlen_cf_fast.cu, spec_update.cu): index clamping, the cache lines of a request, the
// prefix-caching boundaries, and kC channels' weights and bias. Semantics: docs/serving.md.
#pragma once

#include <cstdint>

#include "common.cuh"
#include "varlen.cuh"
#include "vec16.cuh"

namespace causal_conv1d_cuda {
namespace serving {

__device__ __forceinline__ int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : (v > hi ? hi : v); }

// A request's input line (its initial state) and output line (its final state); false when the request
// is skipped: its input line is pad_slot_id, or a line is outside [0, lines) (never accessed).
__device__ __forceinline__ bool request_lines(const CacheIndex& ci, int64_t i, int64_t pad_slot_id, int64_t lines,
                                              int64_t& c_in, int64_t& c_out) {
  if (ci.idx == nullptr) {
    c_in = c_out = i;
  } else if (ci.last_idx == nullptr) {
    c_in = c_out = ci.idx[i * ci.ci_rs];
  } else {  // a table column outside [0, max_blocks) skips the request
    const int64_t a = ci.init_idx[i], b = ci.last_idx[i];
    if (a < 0 || a >= ci.cols || b < 0 || b >= ci.cols) return false;
    c_in = ci.idx[i * ci.ci_rs + a * ci.ci_cs];
    c_out = ci.idx[i * ci.ci_rs + b * ci.ci_cs];
  }
  if (c_in == pad_slot_id) return false;
  return c_in >= 0 && c_in < lines && c_out >= 0 && c_out < lines;
}

// The prefix-caching block boundaries a prefill chunk of request i writes (docs/serving.md): the j-th
// (j < count) is token `first_tok + j * block` of x (absolute), its state goes to line
// idx[i, first_idx[i] + j]. Boundaries at or before the chunk's first token are never written.
struct Boundaries {
  int64_t first_tok = 0;  // x index of boundary 0
  int count = 0;
  int64_t block = 1;
  int64_t row = 0;  // i * ci_rs
  int64_t col0 = 0;  // first_idx[i]
  int64_t cols = 0, cs = 0;

  __device__ __forceinline__ void init(const CacheIndex& ci, int64_t i, int64_t st, int64_t n) {
    count = 0;
    if (ci.last_idx == nullptr || ci.block <= 0 || n <= 0) return;
    const int64_t k = static_cast<int64_t>(ci.last_idx[i]) - ci.first_idx[i];
    if (k <= 0) return;
    const int64_t p0 = ci.computed[i];
    const int64_t last = (p0 + n - 1) / ci.block * ci.block;  // the last multiple of block below p0 + n
    block = ci.block;
    first_tok = st + (last - (k - 1) * block - p0);
    count = static_cast<int>(k);
    row = i * ci.ci_rs;
    col0 = ci.first_idx[i];
    cols = ci.cols;
    cs = ci.ci_cs;
  }
  // The first boundary index whose token is >= t and > st (count when none).
  __device__ __forceinline__ int first_at_or_after(int64_t t, int64_t st) const {
    const int64_t lo = t > st + 1 ? t : st + 1;
    if (lo <= first_tok) return 0;
    const int64_t j = (lo - first_tok + block - 1) / block;
    return j < count ? static_cast<int>(j) : count;
  }
  __device__ __forceinline__ int64_t token(int j) const { return first_tok + j * block; }
  // -1 (not written) for a column outside the table
  __device__ __forceinline__ int64_t line(const CacheIndex& ci, int j) const {
    const int64_t col = col0 + j;
    return col >= 0 && col < cols ? ci.idx[row + col * cs] : -1;
  }
};

// w[c][k] = weight[c0 + c, k - (kW - width)] as float, 0 for the padded taps k < kW - width; bias[c].
// One dtype switch around all the loads (a switch per element would wait for each load before
// the next: ~40 round trips to L2 per thread), 16-byte loads when the rows are contiguous and tile.
template <typename Wt, typename Params, int kC, int kW>
__device__ __forceinline__ void load_weights_as(const Params& p, int64_t c0, float (&w)[kC][kW]) {
  const Wt* __restrict__ base = static_cast<const Wt*>(p.weight) + c0 * p.w_cs;
  constexpr int kBytes = kC * kW * static_cast<int>(sizeof(Wt));
  if (kBytes % 16 == 0 && p.width == kW && p.w_ws == 1 && p.w_cs == kW && (reinterpret_cast<uintptr_t>(base) & 15u) == 0) {
    load_tile16<Wt, kC, kW>(base, w);
    return;
  }
  const int off = kW - p.width;
  Wt raw[kC][kW];
#pragma unroll
  for (int c = 0; c < kC; ++c)
#pragma unroll
    for (int k = 0; k < kW; ++k) raw[c][k] = k >= off ? base[c * p.w_cs + (k - off) * p.w_ws] : from_float<Wt>(0.f);
#pragma unroll
  for (int c = 0; c < kC; ++c)
#pragma unroll
    for (int k = 0; k < kW; ++k) w[c][k] = to_float(raw[c][k]);
}

template <typename Bt, typename Params, int kC>
__device__ __forceinline__ void load_bias_as(const Params& p, int64_t c0, float (&bias)[kC]) {
  const Bt* __restrict__ base = static_cast<const Bt*>(p.bias) + c0 * p.b_s;
  Bt raw[kC];
#pragma unroll
  for (int c = 0; c < kC; ++c) raw[c] = base[c * p.b_s];
#pragma unroll
  for (int c = 0; c < kC; ++c) bias[c] = to_float(raw[c]);
}

template <typename Params, int kC, int kW>
__device__ __forceinline__ void load_weights(const Params& p, int64_t c0, float (&w)[kC][kW], float (&bias)[kC]) {
  switch (p.w_dtype) {
    case kFloat16: load_weights_as<__half, Params, kC, kW>(p, c0, w); break;
    case kBFloat16: load_weights_as<__nv_bfloat16, Params, kC, kW>(p, c0, w); break;
    default: load_weights_as<float, Params, kC, kW>(p, c0, w); break;
  }
  if (p.bias == nullptr) {
#pragma unroll
    for (int c = 0; c < kC; ++c) bias[c] = 0.f;
    return;
  }
  switch (p.b_dtype) {
    case kFloat16: load_bias_as<__half, Params, kC>(p, c0, bias); break;
    case kBFloat16: load_bias_as<__nv_bfloat16, Params, kC>(p, c0, bias); break;
    default: load_bias_as<float, Params, kC>(p, c0, bias); break;
  }
}

// act(bias + sum_k w[k] * tap[k]) for kC channels; taps kW - 1 from the window, the last from xv.
template <int kC, int kW>
__device__ __forceinline__ void conv_out(const float (&w)[kC][kW], const float (&bias)[kC],
                                         const float (&win)[kW - 1][kC], const float (&xv)[kC], bool silu,
                                         float (&o)[kC]) {
#pragma unroll
  for (int c = 0; c < kC; ++c) {
    float acc = bias[c];
#pragma unroll
    for (int k = 0; k < kW - 1; ++k) acc = fmaf(w[c][k], win[k][c], acc);
    acc = fmaf(w[c][kW - 1], xv[c], acc);
    o[c] = silu ? silu_f(acc) : acc;
  }
}

template <int kC, int kH>
__device__ __forceinline__ void shift_in(float (&win)[kH][kC], const float (&xv)[kC]) {
#pragma unroll
  for (int j = 0; j + 1 < kH; ++j)
#pragma unroll
    for (int c = 0; c < kC; ++c) win[j][c] = win[j + 1][c];
#pragma unroll
  for (int c = 0; c < kC; ++c) win[kH - 1][c] = xv[c];
}

// A value of the state dtype St, as float: x is cast to the cache's dtype first (vLLM's rule).
template <typename St>
__device__ __forceinline__ float round_to(float v) {
  return to_float(from_float<St>(v));
}

}  // namespace serving
}  // namespace causal_conv1d_cuda
